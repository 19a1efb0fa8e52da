#!/usr/bin/env bash
# `docker run -it` with Ctrl-C: the main program has the terminal in its foreground, so ^C
# reaches it (its trap runs), and a plain program dies of SIGINT: 130.
source "$(dirname "$0")/lib.sh"

# Runs `docker run -it ... IMAGE CMD` on a pseudo-terminal, waits for READY, types ^C and
# prints "<exit code> <seconds from ^C to exit>" then everything the terminal showed.
ctrl_c() {
    python3 - "$IMAGE" "$@" <<'PY'
import os, pty, select, sys, time
image, cmd = sys.argv[1], sys.argv[2:]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("docker", ["docker", "run", "-it", "--rm", "--network", "none",
                         "--label", "hermes-docker-test=1", image] + cmd)
buf = b""
def pump(timeout):
    global buf
    r, _, _ = select.select([fd], [], [], timeout)
    if r:
        try:
            buf += os.read(fd, 4096)
        except OSError:
            return False
    return True
deadline = time.time() + 60
while b"READY" not in buf and time.time() < deadline:
    pump(0.2)
time.sleep(0.3)
t = time.time()
os.write(fd, b"\x03")
code = None
while time.time() < t + 20:
    pump(0.1)
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        code = os.waitstatus_to_exitcode(status)
        break
print(code, round(time.time() - t, 2))
print(buf.decode(errors="replace").replace("\r", ""))
PY
}

res=$(ctrl_c sh -c 'test -t 0 && echo has-tty; echo READY; exec sleep 60')
read -r code secs <<<"$(head -n 1 <<<"$res")"
assert_eq 130 "$code" "^C ends a plain program with SIGINT: docker run exits 130"
assert_lt "$secs" 2 "^C takes effect at once"
assert_contains "$res" "has-tty" "the main program has the terminal on stdin"

res=$(ctrl_c sh -c 'trap "echo GOT-INT; exit 3" INT; echo READY; while :; do sleep 0.1; done')
read -r code secs <<<"$(head -n 1 <<<"$res")"
assert_contains "$res" "GOT-INT" "the main program's own SIGINT handler runs"
assert_eq 3 "$code" "and its exit code is the container's"
finish
