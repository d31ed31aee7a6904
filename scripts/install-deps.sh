#!/usr/bin/env bash
# Installs the Debian packages irqpilot's tests and workloads use, if missing.
# Idempotent; quiet when everything is present. Needs root (or sudo).
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# Packages ship services (irqbalance, nginx, memcached, mariadb); do not let the
# installer start them: irqpilot's tests start exactly the processes they need.
# An administrator's own policy-rc.d is kept aside and put back afterwards,
# byte for byte with its mode; ours is removed only if there was none.
PRC=${IRQPILOT_POLICY_RC_D:-/usr/sbin/policy-rc.d} # overridable for its test
saved=""
if [ -e "$PRC" ] || [ -L "$PRC" ]; then
  saved=$($SUDO mktemp "$PRC.irqpilot-saved.XXXXXX")
  $SUDO cp -a "$PRC" "$saved"
fi
restore() {
  if [ -n "$saved" ]; then
    $SUDO mv -f "$saved" "$PRC"
  else
    $SUDO rm -f "$PRC"
  fi
}
trap restore EXIT
printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$PRC.irqpilot-new" >/dev/null
$SUDO chmod +x "$PRC.irqpilot-new"
$SUDO mv -f "$PRC.irqpilot-new" "$PRC"
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
