# Sourced: apt_arm64 ARGS... runs apt-get for Debian's arm64 packages with an apt state of the
# project's own ($apt_state, which the caller sets and makes): the machine's dpkg gets no foreign
# architecture and its package lists are not touched.
apt_arm64() {
  apt-get -o APT::Architecture=arm64 -o APT::Architectures::=arm64 -o Dir::State="$apt_state" -o Dir::State::Lists="$apt_state/lists" \
    -o Dir::State::status="$apt_state/status" -o Dir::Cache="$apt_state/cache" -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
apt_arm64_init() {
  rm -rf "$apt_state" && mkdir -p "$apt_state/lists/partial" "$apt_state/cache/archives/partial" && touch "$apt_state/status"
  apt_arm64 update -qq
}
