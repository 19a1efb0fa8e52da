// The profiles page (see src/pages/profiles.rs).
"use strict";
