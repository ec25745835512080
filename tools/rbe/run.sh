#!/usr/bin/env bash
# tools/rbe/run.sh: runs one command against a throwaway remote-execution
# engine (tools/rbe/engine.sh): starts it, runs the command with
# STABLEOPS_REMOTE_EXECUTOR set to its URL, stops it (also on failure and on
# Ctrl-C), and exits with the command's status.
#
#   tools/rbe/run.sh [--workers N] [--name NAME] -- COMMAND [ARG]...
#
# Example:
#   tools/rbe/run.sh -- ./tools/bazel build //python:wheel --config=rbe
#
# Environment: as for tools/rbe/engine.sh.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
engine_args=()
name=run-$$
while (($#)); do
  case $1 in
    --workers | --name)
      [[ -n ${2:-} ]] || { echo "tools/rbe/run.sh: error: $1 needs a value" >&2; exit 2; }
      if [[ $1 == --name ]]; then name=$2; else engine_args+=("$1" "$2"); fi
      shift 2
      ;;
    --) shift; break ;;
    *) echo "tools/rbe/run.sh: error: expected [--workers N] [--name NAME] -- COMMAND..., found '$1'" >&2; exit 2 ;;
  esac
done
(($#)) || { echo "tools/rbe/run.sh: error: no command given; usage: tools/rbe/run.sh [--workers N] -- COMMAND [ARG]..." >&2; exit 2; }

started=
# shellcheck disable=SC2329  # run by the traps below
stop() {
  trap - EXIT INT TERM
  if [[ -n $started ]]; then "$here/engine.sh" stop --name "$name" || true; fi
}
trap 'rc=$?; stop; exit "$rc"' EXIT
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM

started=1
url=$("$here/engine.sh" start --name "$name" "${engine_args[@]}")
echo "tools/rbe/run.sh: remote executor $url; running: $*" >&2
set +e
STABLEOPS_REMOTE_EXECUTOR=$url "$@"
rc=$?
set -e
exit "$rc"
