#!/usr/bin/env bash
# Checks that the repository stands alone, since a clone is all a reader gets:
#   1. no file refers to the directory of notes and designs kept beside a
#      checkout (`name` below), which a clone does not carry;
#   2. every relative link in a Markdown file leads to a file or directory
#      inside the repository.
# Cheap (no build); tests/run.sh runs it first. Prints each offence as
# file:line: what, and "standalone: N offences" last; exits 1 if there are any.
#
#   tests/lint/standalone.sh
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$root" || exit 1

# The files a clone has: tracked ones plus new ones not ignored (so a check
# before committing sees them too); without git, everything but build outputs.
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard)
else
  mapfile -t files < <(find . -path ./.git -prune -o -name 'bazel-*' -prune -o -type f -print |
    sed 's|^\./||')
fi
present=()
for f in "${files[@]}"; do [ -f "$f" ] && present+=("$f"); done

offences=0
offence() {
  echo "$1"
  offences=$((offences + 1))
}

# 1. Spelt in pieces so that this file does not match itself.
name='share''d'
while IFS= read -r hit; do
  offence "$hit  <- refers to '$name' outside the repository: state the fact here, or link docs/"
done < <(grep -nIE -- "$name/|\.\./$name\b" "${present[@]}" /dev/null)

# 2. Inline Markdown links [text](target "title"); web links and in-page
# anchors are not checked.
mapfile -t markdown < <(printf '%s\n' "${present[@]}" | grep '\.md$')
while IFS= read -r hit; do
  file=${hit%%:*} rest=${hit#*:}
  line=${rest%%:*} target=${rest#*:}
  target=${target#](} target=${target%)} target=${target%% *}
  case $target in http://* | https://* | mailto:* | '#'* | '') continue ;; esac
  resolved=$(realpath -m -- "$(dirname "$file")/${target%%#*}")
  if [[ $resolved != "$root" && $resolved != "$root"/* ]]; then
    offence "$file:$line: link to '$target' leads outside the repository"
  elif [ ! -e "$resolved" ]; then
    offence "$file:$line: link to '$target' leads to nothing"
  fi
done < <([ ${#markdown[@]} -eq 0 ] || grep -noE '\]\([^)]+\)' "${markdown[@]}" /dev/null)

echo "standalone: $offences offences"
[ "$offences" -eq 0 ]
