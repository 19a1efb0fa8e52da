// The logs page (see src/pages/logs.rs).
"use strict";
