#!/bin/sh
# The layering of src/: a file includes headers of its own layer or of layers below it,
# never above, and no two headers include each other.  Run by ctest as `layers`.
#   base < runtime < ops < model < tools < cli
# Usage: tools/check-layers.sh [SRC_DIR]
set -eu
src=${1:-$(dirname "$0")/../src}
rank() {
    case $1 in
    base) echo 0 ;; runtime) echo 1 ;; ops) echo 2 ;; model) echo 3 ;; tools) echo 4 ;; cli) echo 5 ;;
    *) echo 99 ;;
    esac
}
bad=0
files=$(cd "$src" && find . -name '*.[ch]' | sed 's|^\./||' | sort)
for f in $files; do
    layer=${f%%/*}
    if [ "$layer" = "$f" ]; then
        echo "layers: $f lies outside the layer folders"
        bad=1
        continue
    fi
    r=$(rank "$layer")
    if [ "$r" = 99 ]; then
        echo "layers: $f is in an unknown layer '$layer'"
        bad=1
        continue
    fi
    # quoted includes only: "layer/file.h"
    for inc in $(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$src/$f"); do
        case $inc in
        tdacl.h) continue ;;
        */*) ;;
        *)
            echo "layers: $f includes \"$inc\" without its layer folder"
            bad=1
            continue
            ;;
        esac
        il=${inc%%/*}
        ir=$(rank "$il")
        if [ "$ir" -gt "$r" ]; then
            echo "layers: $f ($layer) includes $inc from the higher layer $il"
            bad=1
        fi
        if [ ! -f "$src/$inc" ]; then
            echo "layers: $f includes $inc, which does not exist"
            bad=1
        fi
        # a header including a header that includes it back
        case $f in
        *.h)
            if grep -q "#include \"$f\"" "$src/$inc" 2>/dev/null; then
                echo "layers: $f and $inc include each other"
                bad=1
            fi
            ;;
        esac
    done
done
[ $bad = 0 ] && echo "layers: $(echo "$files" | wc -l) files, every include goes to the same or a lower layer"
exit $bad
