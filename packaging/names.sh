# Sourced by the packaging scripts: BUNDLE_FOLDER, BUNDLE_GUI, BUNDLE_CLI, BUNDLE_APP_NAME,
# BUNDLE_VERSION, ... from packaging/bundle.ini (the one place the names are written).
_names_ini="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/bundle.ini"
while IFS='=' read -r _key _value || [ -n "$_key" ]; do
  case "$_key" in ''|\;*|\[*) continue ;; esac
  _key=$(printf '%s' "$_key" | tr '[:lower:]' '[:upper:]')  # no ${x^^}: macOS has bash 3.2
  printf -v "BUNDLE_$_key" '%s' "${_value%$'\r'}"
done < "$_names_ini"
unset _names_ini _key _value
