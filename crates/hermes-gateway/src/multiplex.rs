//! One gateway serving every profile of the volume (*multiplexing*: the original's
//! `gateway.multiplex_profiles`, switched by `hermes_home::multiplex`).
//!
//! Routes: the default profile answers at `/v1/...`, `/health`, ... as it always does; each
//! named profile answers the same routes under `/p/<profile>/` (`/p/work/v1/chat/completions`,
//! `/p/work/health`, ...), and `/p/default/` is the default profile again, as in the original.
//! Every profile's requests are handled by the one set of routes of [`crate::server`], each
//! with that profile's own [`AppState`]: its key, settings, `SOUL.md`, memories, credentials,
//! sessions (`state.db`) and metrics. This module only chooses which state answers.
//!
//! Words:
//! * *directory* — the named profiles the volume holds ([`Directory`]), scanned with
//!   hermes-home's listing (a directory under `profiles/` with a valid name and `SOUL.md`);
//!   scanned again when a request names a profile it does not know, at most once per
//!   [`RESCAN_INTERVAL`], so a profile created while the gateway runs is found, and a flood of
//!   made-up names costs one scan a second.
//! * *mounted profile* — a named profile being served. Its state is built on its first
//!   request (lazily: a profile nobody asks for costs nothing) and kept until the profile is
//!   deleted. Each request for it checks that its `SOUL.md` is still there (one `stat`, like
//!   the reload check): a deleted profile is dropped, and 404 from then on.
//!
//! Rules:
//! * A path segment that is not a valid profile name (`..`, `%2e%2e`, upper case, longer than
//!   64, reserved) is 404 before anything touches the filesystem; a valid name that is not a
//!   profile is 404 with the same OpenAI-style body (`profile_not_found`).
//! * A profile's key opens only its own routes. A named profile without a usable key of its
//!   own (its API server off) refuses every request with the 401 of a wrong key: it never
//!   borrows the listener's key, and is never open because the listener is on loopback.
//! * A named profile whose files cannot be read is served unconfigured (every keyed request
//!   401, the reason as `config_error` in its `/health`) and read again when they change.
//! * Hot reload is per profile: each mounted profile watches its own files ([`crate::live`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::http::uri::PathAndQuery;
use axum::response::{IntoResponse, Response};
use hermes_home::{DEFAULT_PROFILE, Home, ProfileName, ProfileRef};
use tower::ServiceExt;

use crate::api_error::ApiError;
use crate::error::Error;
use crate::server::{AppState, profile_routes};
use crate::source::SettingsSource;

/// The shortest time between two scans of `profiles/`.
pub(crate) const RESCAN_INTERVAL: Duration = Duration::from_secs(1);

/// Where a named profile's routes start.
const PREFIX: &str = "/p/";

/// The named profiles of the volume, as last scanned.
#[derive(Debug)]
pub(crate) struct Directory {
    root: PathBuf,
    scan: Mutex<Scan>,
}

#[derive(Debug, Default)]
struct Scan {
    names: BTreeSet<ProfileName>,
    /// When `names` was read; `None`: never.
    at: Option<Instant>,
}

impl Directory {
    /// The directory of the volume at `root`, scanned now.
    pub(crate) fn new(root: PathBuf) -> Directory {
        let directory = Directory {
            root,
            scan: Mutex::new(Scan::default()),
        };
        directory.rescan(&mut directory.lock());
        directory
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scan> {
        // Fields are replaced whole: a poisoned lock still holds a consistent scan.
        self.scan.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The volume's root: the listener's (the default profile's) home.
    pub(crate) fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// The profiles served, `default` first, as `/health` lists them (scanned again when the
    /// last scan is older than [`RESCAN_INTERVAL`]).
    pub(crate) fn served(&self) -> Vec<String> {
        let mut scan = self.lock();
        if scan.due() {
            self.rescan(&mut scan);
        }
        std::iter::once(DEFAULT_PROFILE.to_owned())
            .chain(scan.names.iter().map(|n| n.as_str().to_owned()))
            .collect()
    }

    /// Whether `name` is a profile, scanning again first when it is not known and the last
    /// scan is old enough.
    fn knows(&self, name: &ProfileName) -> bool {
        let mut scan = self.lock();
        if !scan.names.contains(name) && scan.due() {
            self.rescan(&mut scan);
        }
        scan.names.contains(name)
    }

    /// `name` was found deleted.
    fn forget(&self, name: &ProfileName) {
        self.lock().names.remove(name);
    }

    /// The names known now (for dropping mounted profiles that are gone).
    fn names(&self) -> BTreeSet<ProfileName> {
        self.lock().names.clone()
    }

    fn rescan(&self, scan: &mut Scan) {
        scan.at = Some(Instant::now());
        match hermes_home::profile::list(&self.root) {
            Ok(entries) => {
                scan.names = entries
                    .into_iter()
                    .filter_map(|e| match e.profile {
                        ProfileRef::Named(name) => Some(name),
                        ProfileRef::Default => None,
                    })
                    .collect();
            }
            // The last good list stays: a transient error must not unserve every profile.
            Err(e) => tracing::warn!(
                "cannot list the profiles to serve, the last list stays in use: {}",
                hermes_errors::one_line(&e)
            ),
        }
    }
}

impl Scan {
    fn due(&self) -> bool {
        self.at.is_none_or(|at| at.elapsed() >= RESCAN_INTERVAL)
    }
}

/// What the multiplexing router holds: the default profile's routes and the named ones'.
struct Profiles {
    directory: Arc<Directory>,
    default: Router,
    /// The default profile's settings source: named profiles are read with the same process
    /// environment (`None` for settings built in code: this process's environment).
    source: Option<SettingsSource>,
    mounted: Mutex<BTreeMap<ProfileName, Router>>,
}

/// Which profile a request is for.
enum Selected {
    /// The default profile, with the path it asks for.
    Default(Option<String>),
    /// A mounted profile's routes, with the path under its prefix.
    Profile(Router, String),
    /// No profile by that name: the default profile's `/p/...` route answers 404.
    Unknown,
    /// The profile exists but its state cannot be built (its `state.db` cannot be opened).
    Unavailable(ApiError),
}

/// The routes of every profile, `default` being `default_state`'s (module doc).
pub(crate) fn app(default_state: AppState, directory: Arc<Directory>) -> Router {
    let source = default_state.inner.live.source().cloned();
    let profiles = Profiles {
        directory,
        default: profile_routes(default_state),
        source,
        mounted: Mutex::new(BTreeMap::new()),
    };
    Router::new()
        .fallback(dispatch)
        .with_state(Arc::new(profiles))
}

async fn dispatch(State(profiles): State<Arc<Profiles>>, req: Request) -> Response {
    let (router, req) = match profiles.select(req.uri().path()) {
        Selected::Default(None) | Selected::Unknown => (profiles.default.clone(), req),
        Selected::Default(Some(rest)) => (profiles.default.clone(), with_path(req, &rest)),
        Selected::Profile(router, rest) => (router, with_path(req, &rest)),
        Selected::Unavailable(e) => return e.into_response(),
    };
    match router.oneshot(req).await {
        Ok(resp) => resp,
        Err(never) => match never {},
    }
}

impl Profiles {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ProfileName, Router>> {
        self.mounted.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn select(&self, path: &str) -> Selected {
        let Some(under) = path.strip_prefix(PREFIX) else {
            return Selected::Default(None);
        };
        let (segment, rest) = match under.find('/') {
            Some(i) => (&under[..i], &under[i..]),
            None => (under, "/"),
        };
        if segment == DEFAULT_PROFILE {
            return Selected::Default(Some(rest.to_owned()));
        }
        // Exactly a valid name as written: no trimming, no decoding, no case folding, so
        // nothing but a real profile name ever reaches a path.
        let Some(name) = ProfileName::parse(segment)
            .ok()
            .filter(|n| n.as_str() == segment)
        else {
            return Selected::Unknown;
        };
        // Building a profile's state is a few file reads and opening its database: done
        // under the lock, so two first requests never build it twice.
        let mut mounted = self.lock();
        if !self.directory.knows(&name) {
            mounted.remove(&name);
            return Selected::Unknown;
        }
        let soul = hermes_home::layout::soul_path(&hermes_home::profile::profile_dir(
            &self.directory.root,
            &name,
        ));
        if !soul.is_file() {
            tracing::info!(profile = %name, "profile deleted: no longer served");
            self.directory.forget(&name);
            mounted.remove(&name);
            return Selected::Unknown;
        }
        if let Some(router) = mounted.get(&name) {
            return Selected::Profile(router.clone(), rest.to_owned());
        }
        let known = self.directory.names();
        mounted.retain(|n, _| known.contains(n));
        match self.mount(&name) {
            Ok(router) => {
                mounted.insert(name, router.clone());
                Selected::Profile(router, rest.to_owned())
            }
            Err(e) => {
                let reason = hermes_errors::one_line(&e);
                Selected::Unavailable(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "profile_unavailable",
                    format!("profile `{name}` cannot be served now: {reason}"),
                ))
            }
        }
    }

    /// Builds the state of the named profile `name` and its routes.
    fn mount(&self, name: &ProfileName) -> Result<Router, Error> {
        let home = Home::for_profile(self.directory.root.clone(), ProfileRef::Named(name.clone()))?;
        let dir = home.dir().to_path_buf();
        let source = match &self.source {
            Some(default) => default.for_profile(home),
            None => SettingsSource::from_process(home.clone()).for_profile(home),
        };
        let (fingerprint, loaded) = source.read();
        let state = match loaded {
            Ok(profile) => {
                if !profile.settings.api_server.is_on() {
                    tracing::warn!(
                        profile = %name,
                        "profile `{name}` has no API_SERVER_KEY of its own: its routes refuse \
                         every request; set API_SERVER_KEY in {}",
                        hermes_home::layout::env_path(&dir).display()
                    );
                }
                AppState::mounted(&profile, &self.directory)?
            }
            Err(e) => {
                tracing::warn!(
                    profile = %name,
                    "profile `{name}` cannot be configured, its routes refuse every request \
                     until its files are fixed: {}",
                    hermes_errors::one_line(&e)
                );
                AppState::unconfigured(
                    name.as_str(),
                    &dir,
                    source,
                    fingerprint,
                    &e,
                    &self.directory,
                )?
            }
        };
        tracing::info!(profile = %name, "serving profile `{name}` at {PREFIX}{name}/");
        Ok(profile_routes(state))
    }
}

/// `req` with its path replaced by `path` (the query kept).
fn with_path(mut req: Request, path: &str) -> Request {
    let joined = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.to_owned(),
    };
    // `path` is a tail of a path that parsed, so it parses; if not, the request keeps its
    // own path and the profile's routes answer 404.
    if let Ok(pq) = PathAndQuery::try_from(joined) {
        let mut parts = req.uri().clone().into_parts();
        parts.path_and_query = Some(pq);
        if let Ok(uri) = axum::http::Uri::from_parts(parts) {
            *req.uri_mut() = uri;
        }
    }
    req
}

/// `/p/<name>/...` for a name this gateway does not serve: 404, OpenAI-shaped. The same
/// answer for an invalid name and for a valid one that is not a profile, so the answer says
/// nothing about the filesystem.
pub(crate) async fn not_served() -> Response {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "invalid_request_error",
        "profile_not_found",
        "no such profile is served here (GET /health lists the profiles served)".into(),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn profile(root: &Path, name: &str) {
        let dir = root.join("profiles").join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("SOUL.md"), format!("soul of {name}")).unwrap();
    }

    #[test]
    fn the_directory_lists_valid_profiles_and_rescans_at_most_once_per_interval() {
        let root = tempfile::tempdir().unwrap();
        profile(root.path(), "alpha");
        std::fs::create_dir_all(root.path().join("profiles/nosoul")).unwrap();
        let d = Directory::new(root.path().to_path_buf());
        assert_eq!(d.served(), ["default", "alpha"]);
        profile(root.path(), "beta");
        let beta = ProfileName::parse("beta").unwrap();
        // Just scanned: not found yet, however often asked.
        assert!(!d.knows(&beta));
        assert!(!d.knows(&beta));
        std::thread::sleep(RESCAN_INTERVAL);
        assert!(d.knows(&beta));
        assert_eq!(d.served(), ["default", "alpha", "beta"]);
    }

    #[test]
    fn paths_are_replaced_with_their_query_kept() {
        let req = Request::builder()
            .uri("/p/work/v1/models?x=1")
            .body(axum::body::Body::empty())
            .unwrap();
        let req = with_path(req, "/v1/models");
        assert_eq!(req.uri().path(), "/v1/models");
        assert_eq!(req.uri().query(), Some("x=1"));
    }
}
