# Sourced by scripts/setup.sh and scripts/build-bmv2.sh: the one way either installs what it needs
# from Debian.
#
# install_missing WHO PACKAGE...  installs those of PACKAGE that are not installed yet (as root;
# otherwise it stops, naming them) and leaves their names in `newly_installed`. WHO starts its
# messages.
install_missing() {
    local who=$1 package
    shift
    newly_installed=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" ||
            newly_installed+=("$package")
    done
    ((${#newly_installed[@]})) || return 0
    if [[ $(id -u) -ne 0 ]]; then
        echo "$who: need root to install Debian packages: ${newly_installed[*]}" >&2
        exit 1
    fi
    printf '\033[1m[%s]\033[0m installing Debian packages: %s\n' "$who" "${newly_installed[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q --no-install-recommends "${newly_installed[@]}" >/dev/null
}
