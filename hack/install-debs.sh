#!/usr/bin/env bash
# Installs the Debian packages the test suite needs when they are missing
# (`make test` runs it first, so a fresh machine needs nothing by hand):
#
#   busybox-static   /bin/busybox, the static busybox of the testbox image
#                    (internal/image tests, the cluster tier's test pods)
#   iptables, iproute2   the cluster tier's node network (test/cluster checks
#                    both are on PATH before it starts)
#   qemu-user-static /usr/bin/qemu-aarch64-static, the user-mode emulator the
#                    arm64 smoke test runs the arm64 binaries under
#                    (make smoke-arm64, test/crossarch)
#
# libseccomp-dev (runc) is installed by hack/build-runtime-tools.sh, which
# needs it. Root (CI is root); without apt-get it names the package to install.
set -euo pipefail

need() { # need FILE PACKAGE
  local file="$1" pkg="$2"
  [ -e "$file" ] && return 0
  echo "install-debs: $file missing; installing $pkg with apt-get"
  if ! { apt-get install -y --no-install-recommends "$pkg" >/dev/null 2>&1 ||
         { apt-get update >/dev/null 2>&1 && apt-get install -y --no-install-recommends "$pkg" >/dev/null; }; }; then
    echo "install-debs: cannot install $pkg (apt-get failed); install it (it provides $file) and rerun" >&2
    return 1
  fi
  [ -e "$file" ] || { echo "install-debs: $pkg installed but $file is still missing" >&2; return 1; }
}

need /bin/busybox busybox-static
need /usr/sbin/iptables iptables
need /usr/bin/ip iproute2
need /usr/bin/qemu-aarch64-static qemu-user-static
