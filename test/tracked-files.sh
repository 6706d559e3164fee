#!/usr/bin/env bash
# test/tracked-files.sh: fails when git tracks a built binary (ELF, Mach-O, Windows PE; by the
# file's first bytes), a symbolic link whose target is an absolute path or leaves the repository
# (it dangles in a clean clone), or a file over 1 MiB that test/large-files.txt does not list. That list
# holds only data the tests read, one repository path a line; `#` starts a comment.
# Run by test/run.sh's checks step; from the repository root: test/tracked-files.sh
set -euo pipefail
export LC_ALL=C # byte-wise reads and patterns
cd "$(dirname "${BASH_SOURCE[0]}")/.."
limit=$((1024 * 1024))
allow_file=test/large-files.txt

declare -A allowed=()
if [[ -f "$allow_file" ]]; then
  while IFS= read -r line; do
    line="${line%%#*}"
    line="${line%"${line##*[![:space:]]}"}"
    [[ -n "$line" ]] && allowed["$line"]=1
  done <"$allow_file"
fi

bad=0
# Sizes of the blobs in the index (what a commit records), one git call for every file.
while read -r size path; do
  [[ "$size" == missing ]] && continue # a submodule's commit, not a blob
  if ((size > limit)) && [[ -z "${allowed[$path]:-}" ]]; then
    echo "tracked file $path is $size bytes (over $limit) and not listed in $allow_file as test data"
    bad=1
  fi
done < <(git ls-files -s | sed -E 's/^[0-7]+ ([0-9a-f]+) [0-3]\t/\1 /' \
  | git cat-file --batch-check='%(objectsize) %(rest)')

# The first bytes of each file in the work tree (bash's read: no process per file).
while IFS= read -r -d '' path; do
  [[ -f "$path" && ! -L "$path" ]] || continue
  magic=''
  IFS= read -r -n 4 -d '' magic <"$path" || true
  kind=''
  case "$magic" in
    $'\x7f'ELF) kind='an ELF executable' ;;
    $'\xcf\xfa\xed\xfe' | $'\xce\xfa\xed\xfe' | $'\xfe\xed\xfa\xcf' | $'\xfe\xed\xfa\xce') kind='a Mach-O executable' ;;
    $'\xca\xfe\xba\xbe') kind='a Mach-O universal binary or a Java class file' ;;
    MZ[![:print:][:space:]]*) kind='a Windows (PE) executable' ;;
  esac
  if [[ -n "$kind" ]]; then
    echo "tracked file $path is $kind: built binaries are not committed (see .gitignore)"
    bad=1
  fi
done < <(git ls-files -z)

# Symbolic links (mode 120000): the blob is the link's target.
while read -r _ blob _ path; do
  target="$(git cat-file blob "$blob")"
  dir="$(dirname "$path")"
  if [[ "$target" == /* ]] || ! resolved="$(realpath -m --relative-to=. "$dir/$target")" || [[ "$resolved" == ../* || "$resolved" == .. ]]; then
    echo "tracked symbolic link $path points to $target, outside the repository: it dangles in a clean clone"
    bad=1
  fi
done < <(git ls-files -s | grep '^120000' || true)

if ((bad)); then
  echo "tracked-files check failed: git rm --cached the files above (or list test data in $allow_file)"
  exit 1
fi
