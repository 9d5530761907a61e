#!/bin/sh
# Example subnet-manager hook for rdmanet's GUID pool (docs/infiniband.md).
# rdmanet's ib-sriov plugin runs it on the node as
#   sm-hook.sh <allocate|release> <guid> <pkey> <namespace>/<pod>
# with the same values in RDMANET_HOOK_ACTION, RDMANET_GUID, RDMANET_PKEY,
# RDMANET_POD_NAMESPACE, RDMANET_POD_NAME, RDMANET_POD_UID, RDMANET_NETWORK,
# RDMANET_DEVICE_ID. A non-zero exit on allocate fails the pod's ADD (the GUID
# goes back to the pool); on release it is logged and the GUID is freed anyway.
# rdmanet-controller (--guid-pool-config) runs it too, for GUIDs its IPAM GC
# frees (pod gone without a DEL; RDMANET_RELEASE_REASON says why): there a
# non-zero exit keeps the GUID allocated and the release is retried. When the
# GC cannot know the pod's PKey (pod deleted while no controller watched) the
# pkey argument is empty: the GUID is then removed from every partition.
#
# This example keeps an OpenSM partitions.conf fragment per PKey and asks
# OpenSM to re-read it (SIGHUP). Replace the body with your fabric manager's
# API call (UFM: add/remove the GUID to/from the PKey).
set -eu
action=$1 guid=$2 pkey=$3 pod=$4
dir=${RDMANET_SM_DIR:-/etc/opensm/rdmanet}
if [ -z "$pkey" ] && [ "$action" = allocate ]; then exit 0; fi  # a network without a pkey: nothing to tell the SM
mkdir -p "$dir"
guid0x=0x$(echo "$guid" | tr -d :)
(
  flock 9
  case "$action" in
  allocate)
    file="$dir/$pkey.guids"
    touch "$file"
    grep -qx "$guid0x=full" "$file" || echo "$guid0x=full" >> "$file" ;;
  release)
    if [ -n "$pkey" ]; then files="$dir/$pkey.guids"; else files=$(ls "$dir"/*.guids 2>/dev/null || true); fi
    for file in $files; do
      [ -e "$file" ] || continue
      grep -vx "$guid0x=full" "$file" > "$file.tmp" || true; mv "$file.tmp" "$file"
    done ;;
  *) echo "unknown action $action" >&2; exit 2 ;;
  esac
) 9>"$dir/.lock"
logger -t rdmanet-sm-hook "$action $guid pkey $pkey pod $pod" 2>/dev/null || true
# pkill -HUP -x opensm   # uncomment where OpenSM runs on this host
