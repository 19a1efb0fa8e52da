// The sessions page (see src/pages/sessions.rs).
"use strict";
