#!/usr/bin/env bash
# Refresh the browser assets served from the package (no CDN at run time): uPlot (MIT),
# Swagger UI (Apache-2.0) and ReDoc (MIT), taken from the npm registry with `npm pack` at the
# pinned versions below, copied with their licences into orchestrator/app/web/static/vendor/.
# Run it by hand when bumping a version; the copies are committed (the package ships them).
set -euo pipefail
cd "$(dirname "$0")/.."
UPLOT=1.6.32 SWAGGER=5.35.0 REDOC=2.5.4
DEST=orchestrator/app/web/static/vendor
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
(cd "$TMP" && npm pack --silent "uplot@$UPLOT" "swagger-ui-dist@$SWAGGER" "redoc@$REDOC" >/dev/null)
for pkg in "uplot-$UPLOT" "swagger-ui-dist-$SWAGGER" "redoc-$REDOC"; do
  mkdir -p "$TMP/$pkg" && tar xzf "$TMP/$pkg.tgz" -C "$TMP/$pkg"
done
mkdir -p "$DEST/uplot" "$DEST/swagger-ui" "$DEST/redoc"
P="$TMP/uplot-$UPLOT/package"
cp "$P/dist/uPlot.iife.min.js" "$P/dist/uPlot.min.css" "$P/LICENSE" "$DEST/uplot/"
P="$TMP/swagger-ui-dist-$SWAGGER/package"
cp "$P/swagger-ui-bundle.js" "$P/swagger-ui-bundle.js.LICENSE.txt" "$P/swagger-ui.css" \
   "$P/favicon-32x32.png" "$P/LICENSE" "$P/NOTICE" "$DEST/swagger-ui/"
P="$TMP/redoc-$REDOC/package"
cp "$P/bundles/redoc.standalone.js" "$P/bundles/redoc.standalone.js.LICENSE.txt" "$P/LICENSE" \
   "$DEST/redoc/"
# ReDoc's sidebar badge loads its logo from a CDN: point it at a local copy (offline docs).
sed -i 's#https://cdn.redoc.ly/redoc/logo-mini.svg#/static/vendor/redoc/logo-mini.svg#' \
  "$DEST/redoc/redoc.standalone.js"
printf '%s\n' '<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 16 16"><circle cx="8" cy="8" r="7" fill="#c33"/></svg>' \
  > "$DEST/redoc/logo-mini.svg"
printf 'uplot %s (MIT)\nswagger-ui-dist %s (Apache-2.0)\nredoc %s (MIT; CDN logo URL pointed at a local logo-mini.svg)\n' \
  "$UPLOT" "$SWAGGER" "$REDOC" > "$DEST/VERSIONS.txt"
echo "vendored into $DEST: $(cat "$DEST/VERSIONS.txt" | tr '\n' ' ')"
