#!/bin/bash
# Installs the packages of the given lists (tools/packages*.txt) that are not installed yet,
# without Debian's "Recommends" (they pulled ~800 MB of documentation and image tools).
# Uses sudo when not root.  Prints what it installs.
set -euo pipefail
missing=()
for list in "$@"; do
    while read -r p; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' "$list")
done
[ "${#missing[@]}" -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing (apt-get, no recommends): ${missing[*]}"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
