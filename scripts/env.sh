# shellcheck shell=bash
# Source this to use the checkout as the collection llmfleet.seats:  . scripts/env.sh
_llmfleet_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH="$_llmfleet_root/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$_llmfleet_root/.build/collections"
export ANSIBLE_COLLECTIONS_SCAN_SYS_PATH=false
export ANSIBLE_CONFIG="$_llmfleet_root/ansible.cfg"
unset _llmfleet_root
