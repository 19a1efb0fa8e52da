#!/usr/bin/env bash
# The size budget itself (tests/docker/image_budget.py): a base that grew passes with a note; one
# of our layers over its budget fails naming the layer; a package that grew is named; a broken
# budget file is a one-line error.
source "$(dirname "$0")/lib.sh"

checker=$(dirname "$0")/image_budget.py
base=${HDT_BASE_IMAGE:-debian:trixie-slim}
tag=hdt-image-budget-$$
trap 'docker rmi -f "$tag-base" "$tag-grown" "$tag-ballast" >/dev/null 2>&1; hdt_cleanup' EXIT

# 1. Debian's base grew by 10 MB, our Dockerfile unchanged: the image is built again on the
#    bigger base (as a new day's debootstrap would give) and passes, with one line saying so.
printf 'FROM %s\nRUN head -c 10000000 /dev/urandom >/usr/share/hdt-ballast\n' "$base" \
    | docker build -q --network none -t "$tag-base" - >/dev/null || fail "building the grown base"
(cd "${HDT_REPO:?}" && DOCKER_BUILDKIT=0 docker build -q --network host -f docker/Dockerfile \
    --target runtime-prebuilt --build-arg DEBIAN_IMAGE="$tag-base" \
    --build-arg HERMES_BINARY="${HDT_CONTEXT_BINARY:?}" -t "$tag-grown" . >"$HDT_TMP/build.log" 2>&1) \
    || fail "building the image on the grown base" "$(tail -n 5 "$HDT_TMP/build.log")"
assert_rc 0 "the image on a base 10 MB bigger passes" -- \
    python3 "$checker" check --image "$tag-grown" --base "$tag-base"
notes=$(grep -c '^note: the base' <<<"$OUT")
assert_eq 1 "$notes" "one line says the base grew"
assert_match "$OUT" "note: the base $tag-base grew by 1[0-9]\.[0-9] MB" "the note says by how much"
assert_not_contains "$OUT" "FAIL" "nothing of ours is judged over budget"

# 2. One of our layers grows past its budget: the check fails and names the layer and its step.
printf 'FROM %s\nRUN head -c 30000000 /dev/urandom >/opt/hermes/ballast\n' "$IMAGE" \
    | docker build -q --network none -t "$tag-ballast" - >/dev/null || fail "building the image with a ballast layer"
assert_rc 1 "a 30 MB layer of ours fails the budget" -- \
    python3 "$checker" check --image "$tag-ballast" --base "$base"
assert_match "$OUT" 'FAIL: our layer `other` is [0-9.]+ MB, over its [0-9.]+ MB budget \(its biggest step: [^)]*head -c 30000000' \
    "the failure names the layer and the step that grew"

# 3. A package of our apt layer grew: with the apt layer's budget 1 MB under what it measures
#    and python3's interpreter recorded 2 MB smaller, the failure names both.
budget=$HDT_TMP/budget.txt
apt_mb=$(python3 "$checker" check --image "$IMAGE" --base "$base" | awk '$1 == "apt" { print $2 }')
interpreter=$(awk '$1 == "package" && $2 ~ /^python3\.[0-9]+-minimal$/ { print $2; exit }' "$(dirname "$0")/image-budget.txt")
awk -v apt="$apt_mb" -v pkg="$interpreter" '
    $1 == "layer" && $2 == "apt" { $3 = sprintf("%.1f", apt - 1) }
    $1 == "package" && $2 == pkg { $4 = $4 - 2000 }
    { print }' "$(dirname "$0")/image-budget.txt" >"$budget"
assert_rc 1 "an apt layer over its budget fails" -- \
    python3 "$checker" check --image "$IMAGE" --base "$base" --budget "$budget"
assert_contains "$OUT" 'FAIL: our layer `apt` is' "the failure names the apt layer"
assert_match "$OUT" "$interpreter grew [0-9]+ → [0-9]+ KiB \\(\\+2000" "the failure names the package that grew"

# 4. A broken budget file: one line, exit 2.
printf 'layer apt sixty apt-get\n' >"$HDT_TMP/broken.txt"
assert_rc 2 "a malformed budget file is a usage error" -- \
    python3 "$checker" check --image "$IMAGE" --base "$base" --budget "$HDT_TMP/broken.txt"
assert_match "$OUT" "^image_budget: error: $HDT_TMP/broken.txt:1: " "one line naming the file and line"
assert_eq 1 "$(wc -l <<<"$OUT")" "the error is one line"
finish
