"""hermes-agent's API server serves the socket the Hermes supervisor holds for it.

Installed by Hermes into the site-packages of hermes-agent's venv, with `00-hermes-listen.pth`
beside it (`hermes_services::agent_hook`; the full image runs docker/agent-site.sh). The .pth
imports this module at interpreter start only when LISTEN_FDS is set, so every other start of
the venv's Python pays one environment lookup and nothing else.

The supervisor binds a gateway's API address once, keeps it across restarts and crashes, and
passes it to each process it starts as systemd's socket activation does: fds from 3 on,
LISTEN_FDS, LISTEN_PID, LISTEN_FDNAMES; the API socket is named `api`. When LISTEN_PID is this
process (as `sd_listen_fds` checks; a child that inherited the variables is not addressed):

* every inherited fd is made non-inheritable at once and the three variables leave the
  environment, so the agent's tools and subprocesses never get the socket nor believe they did;
* the aiohttp site the agent's API server starts on the socket's port serves a duplicate of the
  socket instead of binding (a bind would fail with EADDRINUSE: the supervisor holds the port);
* on SIGTERM the server stops accepting at once (new connections wait in the backlog for the
  next instance), connections get no further keep-alive, and the agent's own SIGTERM handling
  is held back until the requests in flight are answered, for at most
  HERMES_GATEWAY_DRAIN_TIMEOUT seconds (default 30); a second SIGTERM stops waiting.

The shared socket is never shut down (shutdown() would end it for the supervisor and the next
instance too): only this process's copies are closed. Nothing here may stop the agent from
starting: a failure is one line on stderr, and the agent then binds as it would without us.
"""

import os
import sys

API = "api"
FIRST_FD = 3
DRAIN_VAR = "HERMES_GATEWAY_DRAIN_TIMEOUT"
DRAIN_DEFAULT = 30.0


def _say(line):
    try:
        sys.stderr.write("hermes: " + line + "\n")
        sys.stderr.flush()
    except Exception:
        pass


def _inherited(environ):
    """{name: fd} passed to this process, each fd made non-inheritable; {} if none is ours."""
    try:
        pid = int(environ.get("LISTEN_PID", ""))
        count = int(environ.get("LISTEN_FDS", ""))
    except ValueError:
        return {}
    if pid != os.getpid() or count < 1:
        return {}
    names = environ.get("LISTEN_FDNAMES", "").split(":")
    # As sd_listen_fds(unset_environment=1): a process this one execs in place or spawns
    # must not take fds it does not have for sockets.
    for var in ("LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"):
        environ.pop(var, None)
    fds = {}
    for i in range(count):
        fd = FIRST_FD + i
        try:
            os.set_inheritable(fd, False)
        except OSError:
            continue  # not open: nothing to adopt
        fds.setdefault(names[i] if i < len(names) else "", fd)
    return fds


def _listener(fd):
    """The listening TCP socket at `fd`, or None (said why)."""
    import socket

    try:
        sock = socket.socket(fileno=fd)
    except OSError as e:
        _say("fd %d named %s is not a socket (%s); the API server binds its own port" % (fd, API, e))
        return None
    listening = (
        sock.type == socket.SOCK_STREAM
        and sock.family in (socket.AF_INET, socket.AF_INET6)
        and sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
    )
    if not listening:
        sock.detach()
        _say("fd %d named %s is not a listening TCP socket; the API server binds its own port" % (fd, API))
        return None
    return sock


def _backlog(sock):
    """The socket's backlog (Linux reports a listener's in TCP_INFO's tcpi_sacked), so the
    listen() asyncio repeats keeps the supervisor's instead of aiohttp's 128."""
    import socket
    import struct

    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32)
        return struct.unpack_from("8B6I", info)[-1] or socket.SOMAXCONN
    except (AttributeError, OSError, struct.error):
        return socket.SOMAXCONN


class _Shared:
    """The supervisor's socket in this process, and what serves it."""

    def __init__(self, sock):
        self.sock = sock  # kept open for the process's life: each site serves a dup
        host, port = sock.getsockname()[:2]
        self.port = port
        self.address = ("[%s]:%d" if ":" in host else "%s:%d") % (host, port)
        self.backlog = _backlog(sock)
        self.sites = []
        self.in_flight = 0
        self.idle = None  # an asyncio.Event while draining
        self.stopped = False
        self.waiting = None  # the drain task

    def serving(self):
        return [s for s in self.sites if s._server is not None and s._server.is_serving()]

    def stop_accepting(self):
        # The listener leaves the loop but stays open: closing the asyncio Server here would
        # break a connection accepted in this same loop iteration (its transport refuses a
        # closed server, and the socket is dropped unanswered). aiohttp's own site.stop() in
        # the agent's shutdown closes our dup later, never with shutdown().
        for site in self.serving():
            loop = site._server.get_loop()
            for sock in site._server.sockets or ():
                loop.remove_reader(sock.fileno())
        for site in self.sites:
            server = getattr(site._runner, "server", None)
            for conn in getattr(server, "connections", None) or ():
                conn.keep_alive(False)  # answered, then closed: no new request on it

    def finished(self):
        self.in_flight -= 1
        if self.in_flight == 0 and self.idle is not None:
            self.idle.set()


SHARED = None


def _count_requests(server):
    """Counts the requests `server` (aiohttp's web_server.Server) is handling."""
    handler = server.request_handler
    if getattr(handler, "_hermes_counted", False):
        return

    async def counted(request):
        if SHARED.stopped:
            # A connection accepted just before SIGTERM: answer it, then close it.
            request.protocol.keep_alive(False)
        SHARED.in_flight += 1
        try:
            return await handler(request)
        finally:
            SHARED.finished()

    counted._hermes_counted = True
    server.request_handler = counted


def _patch_aiohttp(web_runner):
    """TCPSite.start on the shared socket's port serves the socket (as SockSite.start does)."""
    original = web_runner.TCPSite.start
    base_start = web_runner.BaseSite.start

    async def start(self):
        if getattr(self, "_port", None) != SHARED.port:
            return await original(self)
        import asyncio

        await base_start(self)
        server = self._runner.server
        _count_requests(server)
        self._server = await asyncio.get_running_loop().create_server(
            server,
            sock=SHARED.sock.dup(),
            ssl=self._ssl_context,
            backlog=max(self._backlog, SHARED.backlog),
        )
        try:
            self._bound_port = SHARED.port  # aiohttp >= 3.12 reports it as `port`
        except AttributeError:
            pass
        SHARED.sites.append(self)
        SHARED.stopped = False
        _say("serving the supervisor's socket " + SHARED.address)

    web_runner.TCPSite.start = start


def _drain_timeout():
    import math

    raw = os.environ.get(DRAIN_VAR, "").strip()
    try:
        value = float(raw) if raw else DRAIN_DEFAULT
    except ValueError:
        value = None
    if value is None or not math.isfinite(value):
        _say("%s=%r is not a number of seconds; waiting up to %g s" % (DRAIN_VAR, raw, DRAIN_DEFAULT))
        return DRAIN_DEFAULT
    return max(0.0, value)


async def _drain_then(callback, args):
    import asyncio
    import time

    timeout = _drain_timeout()
    started = time.monotonic()
    _say(
        "SIGTERM: draining %d API request(s) in flight before the agent stops (up to %g s)"
        % (SHARED.in_flight, timeout)
    )
    SHARED.idle = asyncio.Event()
    if SHARED.in_flight == 0:
        SHARED.idle.set()
    try:
        await asyncio.wait_for(SHARED.idle.wait(), timeout)
        _say("drained the API requests in flight in %.1f s" % (time.monotonic() - started))
    except asyncio.TimeoutError:
        _say(
            "%d API request(s) still running after %g s: the agent's shutdown ends them"
            % (SHARED.in_flight, timeout)
        )
    callback(*args)


def _drain_first(loop, callback, args):
    """The agent's SIGTERM handler, run once the API requests in flight are answered."""

    def on_sigterm():
        if SHARED.waiting is not None and not SHARED.waiting.done():
            SHARED.waiting.cancel()
            _say("SIGTERM again: the agent stops now")
            return callback(*args)
        if SHARED.stopped or not SHARED.serving():
            return callback(*args)
        SHARED.stopped = True
        SHARED.stop_accepting()
        if SHARED.in_flight == 0:
            return callback(*args)
        SHARED.waiting = loop.create_task(_drain_then(callback, args))

    return on_sigterm


def _patch_signals(unix_events):
    """SIGTERM handlers registered on asyncio's loop drain first (the agent registers its own
    with loop.add_signal_handler before its API server starts)."""
    import signal

    loop_class = unix_events.SelectorEventLoop
    original = loop_class.add_signal_handler

    def add_signal_handler(self, sig, callback, *args):
        if sig == signal.SIGTERM:
            return original(self, sig, _drain_first(self, callback, args))
        return original(self, sig, callback, *args)

    loop_class.add_signal_handler = add_signal_handler


class _AfterImport:
    """Runs `patch(module)` right after the module `name` is first executed."""

    def __init__(self, name, patch):
        self.name = name
        self.patch = patch
        self.done = False

    def find_spec(self, fullname, path=None, target=None):
        if self.done or fullname != self.name:
            return None
        self.done = True
        from importlib.machinery import PathFinder

        spec = PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            _say("cannot find %s to patch; the API server binds its own port" % fullname)
            return spec
        exec_module = spec.loader.exec_module
        patch = self.patch

        def exec_then_patch(module):
            exec_module(module)
            _safely(patch, module)

        spec.loader.exec_module = exec_then_patch
        return spec


def _safely(patch, module):
    try:
        patch(module)
    except Exception as e:
        _say("cannot serve the supervisor's socket (%s: %s)" % (type(e).__name__, e))


def _after_import(name, patch):
    if name in sys.modules:
        _safely(patch, sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, patch))


def _install():
    global SHARED
    fds = _inherited(os.environ)
    if not fds:
        return
    if API not in fds:
        _say("no socket named %s among %s; the API server binds its own port" % (API, ", ".join(sorted(fds)) or "the fds passed"))
        return
    sock = _listener(fds[API])
    if sock is None:
        return
    SHARED = _Shared(sock)
    _after_import("aiohttp.web_runner", _patch_aiohttp)
    _after_import("asyncio.unix_events", _patch_signals)


try:
    _install()
except Exception as e:  # never stop the agent from starting
    _say("cannot serve the supervisor's socket (%s: %s)" % (type(e).__name__, e))
