#!/usr/bin/env bash
# `hermes dump` / `hermes version` in the image name the commit and the docker install method.
source "$(dirname "$0")/lib.sh"

short=${HDT_BINARY_SHA:0:8}
assert_match "$short" '^[0-9a-f]{8}$' "the host binary knows its commit"
assert_rc 0 "hermes dump" -- drun -- dump
assert_contains "$OUT" "version:          $HDT_VERSION [$short]" "dump's version line names the commit"
assert_contains "$OUT" "install:          docker (/opt/hermes/bin)" "dump says docker and the install dir"
assert_rc 0 "hermes version --json" -- drun -- version --json
json=$(plain "$OUT")
assert_eq "$HDT_BINARY_SHA docker /opt/hermes/bin" \
    "$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["build"]["sha"], j["install"]["method"], j["install"]["dir"])' "$json")" \
    "version --json: sha, method and dir"
# The baked file is the fallback for a binary built without .git: it must hold the commit too.
assert_rc 0 "baked SHA file" -- drun --entrypoint cat -- /opt/hermes/bin/.hermes_build_sha
assert_eq "$HDT_GIT_SHA" "$OUT" ".hermes_build_sha holds HERMES_GIT_SHA"
finish
