# Shared by the scripts: install what is missing through apt-get, or say exactly what is missing.
# Usage: ensure_packages CHECK:PACKAGE ... where CHECK is a command name or a header path
# (starting with /) whose presence means PACKAGE is installed.

ensure_packages() {
  local missing=()
  local spec check package
  for spec in "$@"; do
    check=${spec%%:*}
    package=${spec#*:}
    if [[ $check == /* ]]; then
      [ -e "$check" ] || missing+=("$package")
    else
      command -v "$check" >/dev/null 2>&1 || missing+=("$package")
    fi
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -ne 0 ]; then
    echo "error: missing ${missing[*]}; run as root, or install it: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "installing ${missing[*]}" >&2
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2
}

ensure_swift() {
  command -v swift >/dev/null 2>&1 && return 0
  [ -x /opt/swift/usr/bin/swift ] && { PATH="/opt/swift/usr/bin:$PATH"; return 0; }
  echo "error: no Swift toolchain on PATH (Swift 6.1 or later is needed)" >&2
  exit 1
}
