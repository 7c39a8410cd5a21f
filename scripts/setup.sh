#!/usr/bin/env bash
# Installs what farmhand needs and is missing, on Debian 12 with Node >= 20.19:
# Debian packages (ffmpeg, git, python3, socat, LIRC), the npm dependencies,
# then builds dist/ and puts the `farmhand` command on PATH (scripts/link-command.sh).
# Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages: capture and video (ffmpeg), test packs (git), test scripts
# (python3 with numpy and OpenCV), the virtual set-top box's text and stbt.draw_text on the video (fonts-dejavu-core),
# serial tests (socat), the IR oracle and remote files (lirc, lirc-compat-remotes),
# jUnit schema checks (libxml2-utils), systemd unit checks (systemd), /metrics and alert-rule checks
# (prometheus, for promtool only: its server is disabled when setup installs it), the farm's database and
# its throwaway test clusters (postgresql: initdb, pg_ctl; see docs/farm.md), and the web portal's browser
# tests (chromium, driven by playwright-core: Playwright's own browser download is not used).
# haproxy: docs/farm.md's configuration in front of a portal, checked by a real HAProxy
# (test/farm/portal-haproxy.test.ts; its service is disabled when setup installs it).
# tesseract-ocr and tesseract-ocr-eng: the stbt API's ocr and match_text (python/stbt_core/_ocr.py); a pack
# that reads another language needs its tesseract-ocr-<lang> package too. python3-tesserocr: the resident OCR
# worker (python/stbt_core/_ocr_worker.py) keeps tesseract's models loaded in one child process per test,
# about 8x less CPU per line read than running the tesseract command each time (which stays the fallback).
# python3-networkx: the stbt API's on-screen Keyboard is a networkx graph (Keyboard.G), as in stb-tester.
# fonts-liberation, fonts-roboto-unhinted, fonts-open-sans: the TV-like fonts (condensed and light sans-serifs) of
# the OCR corpus that text_color is measured on (test/python/_ocr_corpus.py, bench/stbt-ocr-bench.py).
# adb: stbt.android drives Android devices with the adb command (python/stbt_core/android.py).
# v4l-utils: cec-ctl, through which an HDMI-CEC remote (ir.uri cec:/dev/cec0) sends its keys. snmpd and snmp:
# net-snmp's agent and tools, the SNMP peer the power-outlet driver (power.uri snmp://) is tested against; the
# agent's own service is disabled when setup installs it (the tests start their own on loopback).
PACKAGES=(ffmpeg git python3 python3-numpy python3-opencv fonts-dejavu-core tesseract-ocr tesseract-ocr-eng python3-tesserocr python3-networkx adb v4l-utils snmpd snmp fonts-liberation fonts-roboto-unhinted fonts-open-sans socat lirc lirc-compat-remotes libxml2-utils systemd prometheus postgresql chromium haproxy)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  # lirc's postinst tries to start its service; on a machine without systemd that is harmless.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # Debian's prometheus package starts a Prometheus server; a test node needs only its promtool.
  if [[ " ${missing[*]} " == *" prometheus "* ]] && command -v systemctl >/dev/null; then
    $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true
  fi
  if [[ " ${missing[*]} " == *" snmpd "* ]] && command -v systemctl >/dev/null; then
    $SUDO systemctl disable --now snmpd >/dev/null 2>&1 || true
  fi
  # Likewise haproxy's service (with Debian's sample config): the test runs its own haproxy.
  if [[ " ${missing[*]} " == *" haproxy "* ]] && command -v systemctl >/dev/null; then
    $SUDO systemctl disable --now haproxy >/dev/null 2>&1 || true
  fi
fi

# The OpenAPI document's third-party check (test/unit/openapi-validators.test.ts) runs Python's
# openapi-spec-validator, with Debian's python3 if it has it, else the python3 on PATH. Debian 13 packages it
# (python3-openapi-spec-validator); Debian 12 does not, so there it comes from pip for the python3 on PATH.
has_spec_validator() { /usr/bin/python3 -c 'import openapi_spec_validator' 2>/dev/null || python3 -c 'import openapi_spec_validator' 2>/dev/null; }
if ! has_spec_validator; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  if apt-cache show python3-openapi-spec-validator >/dev/null 2>&1; then
    echo "setup: installing Debian package python3-openapi-spec-validator"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-openapi-spec-validator >/dev/null
  else
    echo "setup: installing openapi-spec-validator with pip (not packaged by this Debian)"
    # A python3 on PATH with its own pip (a pyenv, a venv) takes it as is. Otherwise Debian's python3, whose pip
    # is the python3-pip package; Debian refuses a system-wide pip install (PEP 668), so it goes into the
    # user's own site-packages, which Debian's python3 reads.
    if ! python3 -m pip install --quiet openapi-spec-validator 2>/dev/null; then
      /usr/bin/python3 -m pip --version >/dev/null 2>&1 ||
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
      /usr/bin/python3 -m pip install --quiet --user --break-system-packages openapi-spec-validator || true
    fi
  fi
  has_spec_validator || echo "setup: warning: Python's openapi-spec-validator is still missing; test/unit/openapi-validators.test.ts will fail" >&2
fi

# Debian keeps initdb and pg_ctl off PATH, under /usr/lib/postgresql/<version>/bin; the farm's tests
# and benches look there (newest version first) unless PG_BIN names the folder.
PG_BIN_FOUND="${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n | tail -n 1)}"
if [ -n "$PG_BIN_FOUND" ] && [ -x "$PG_BIN_FOUND/initdb" ]; then
  echo "setup: PostgreSQL tools in $PG_BIN_FOUND"
else
  echo "setup: warning: initdb not found under /usr/lib/postgresql/<version>/bin; set PG_BIN for the farm's tests" >&2
fi

node -e 'const [a,b]=process.versions.node.split(".").map(Number); if (a<20||(a===20&&b<19)) { console.error("setup: farmhand needs Node >= 20.19, this is "+process.version); process.exit(1) }'

if [ ! -d node_modules ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies"
  npm ci --no-audit --no-fund --loglevel=error
fi
# stbt's OcrEngine.TESSERACT and TESSERACT_AND_LSTM (tesseract's legacy engine, stb-tester's default) need
# language data with the legacy models, which Debian's tesseract-ocr-eng does not have. English's comes from
# tesseract's own tessdata, as the npm package @tesseract.js-data/eng ships it (pinned in package-lock.json),
# unpacked into python/tessdata-legacy/ (python/stbt_core/_ocr_tesseract.py, LEGACY_TESSDATA).
LEGACY_ENG=python/tessdata-legacy/eng.traineddata
LEGACY_ENG_GZ=node_modules/@tesseract.js-data/eng/4.0.0/eng.traineddata.gz
if [ ! -s "$LEGACY_ENG" ]; then
  if [ ! -f "$LEGACY_ENG_GZ" ]; then
    echo "setup: installing npm dependencies ($LEGACY_ENG_GZ is missing)"
    npm ci --no-audit --no-fund --loglevel=error
  fi
  echo "setup: unpacking the legacy OCR engine's English data"
  mkdir -p python/tessdata-legacy
  gunzip -c "$LEGACY_ENG_GZ" > "$LEGACY_ENG.partial"
  mv "$LEGACY_ENG.partial" "$LEGACY_ENG"
fi
echo "setup: building"
npm run --silent build
# The build makes dist/main.js executable (package.json "postbuild"); link it as `farmhand`.
# FARMHAND_BIN_DIR chooses where (default: /usr/local/bin as root, else npm's global bin or ~/.local/bin).
scripts/link-command.sh "${FARMHAND_BIN_DIR:-}"
