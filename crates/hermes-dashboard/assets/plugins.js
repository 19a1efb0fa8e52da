// The plugins page (see src/pages/plugins.rs).
"use strict";
