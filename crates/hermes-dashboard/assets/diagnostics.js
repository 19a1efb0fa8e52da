// The diagnostics page (see src/pages/diagnostics.rs).
"use strict";
