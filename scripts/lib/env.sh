# Sourced by deps.sh, demo.sh and test.sh: the environment that the build and the tests need, whoever
# runs them (root, a user with sudo, or `sudo bash scripts/...`).
#
#   roceperf_env          PATH gains the sbin directories (ip, iptables, ldconfig, tc: a user's PATH often
#                         lacks them) and a rustup cargo when there is one: ~/.cargo/bin, and under sudo
#                         the invoking user's (sudo's secure_path drops it), with RUSTUP_HOME at that
#                         user's toolchains so that rustup's proxies find them.
#   roceperf_give_back P  under sudo, hands the paths P (target/, results/) back to the invoking user on
#                         exit (roceperf_chown_back), so that their own cargo can write there again.
#
# DEPS_ROOT (for the tests of deps.sh only) is prepended to every file-system path looked at.

# roceperf_home USER: USER's home directory, from the password database.
roceperf_home() {
    local line
    line=$(getent passwd "$1" 2>/dev/null) || return 1
    IFS=: read -r _ _ _ _ _ line _ <<<"$line"
    [[ -n $line ]] && printf '%s\n' "$line"
}

roceperf_env() {
    local root=${DEPS_ROOT:-} d h homes=()
    for d in "$root/usr/local/sbin" "$root/usr/sbin" "$root/sbin"; do
        [[ ":$PATH:" == *":$d:"* ]] || PATH="$PATH:$d"
    done
    # Under sudo the invoking user's toolchain comes first: it is the one that user builds with.
    if [[ -n ${SUDO_USER:-} && $SUDO_USER != root ]] && h=$(roceperf_home "$SUDO_USER"); then
        homes+=("$h")
    fi
    [[ -n ${HOME:-} ]] && homes+=("$HOME")
    for h in "${homes[@]}"; do
        if [[ -x $h/.cargo/bin/cargo ]]; then
            [[ ":$PATH:" == *":$h/.cargo/bin:"* ]] || PATH="$h/.cargo/bin:$PATH"
            if [[ $h != "${HOME:-}" && -z ${RUSTUP_HOME:-} && -d $h/.rustup ]]; then
                export RUSTUP_HOME=$h/.rustup
            fi
            break
        fi
    done
    export PATH
}

roceperf_give_back() {
    ROCEPERF_GIVE_BACK=("$@")
    trap roceperf_chown_back EXIT
}

# The EXIT trap of roceperf_give_back; a script with its own EXIT trap calls it from there.
roceperf_chown_back() {
    [[ $(id -u) == 0 && -n ${SUDO_UID:-} && ${SUDO_UID:-0} != 0 && -n ${ROCEPERF_GIVE_BACK+x} ]] || return 0
    chown -R "$SUDO_UID:${SUDO_GID:-$SUDO_UID}" "${ROCEPERF_GIVE_BACK[@]}" 2>/dev/null || true
}
