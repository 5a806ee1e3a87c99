#!/usr/bin/env bash
# Builds the Dockerfile with podman/buildah from Debian's packages and runs
# the image until its health check passes, on a machine that cannot pull
# base images: the build stage's golang image is stood in for by one made
# from this machine's own Go (GO_IMAGE), which is all the stage uses (go,
# sh, mkdir, chmod, the root certificates). Not part of CI (a cold build
# takes minutes); run it by hand after changing the Dockerfile:
#
#   apt-get install -y podman buildah runc busybox-static
#   bash deploy/image-check.sh
#
# The storage driver vfs, the runtime runc and the lowered ulimits are what
# a sandbox without overlayfs, cgroup v2 or CAP_SYS_RESOURCE needs; on an
# ordinary host, `docker build .` is all there is to it.
set -euo pipefail
cd "$(dirname "$0")/.."
P=(podman --storage-driver vfs --runtime runc)
limits=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
go_version=$(go env GOVERSION); go_version=${go_version#go}
standin="localhost/go-standin:$go_version"
if ! "${P[@]}" image exists "$standin"; then
  root=$(mktemp -d)
  mkdir -p "$root"/{bin,usr/local,etc/ssl/certs,tmp,root,go}
  cp -a "$(go env GOROOT)" "$root/usr/local/go"
  cp /bin/busybox "$root/bin/"
  for c in sh mkdir chmod; do ln -s busybox "$root/bin/$c"; done
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  chmod 1777 "$root/tmp"
  tar -C "$root" -c . | "${P[@]}" import --change 'ENV PATH=/usr/local/go/bin:/bin' \
    --change 'ENV GOPATH=/go' --change 'ENV GOTOOLCHAIN=local' --change 'ENV HOME=/root' - "$standin"
  rm -rf "$root"
fi
buildah --storage-driver vfs bud --runtime runc --network host "${limits[@]}" --format docker \
  --build-arg GO_IMAGE="$standin" -t localhost/storelink:check .

name=storelink-image-check
"${P[@]}" rm -f -v "$name" >/dev/null 2>&1 || true
"${P[@]}" run -d --name "$name" "${limits[@]}" -p 127.0.0.1:18080:8080 localhost/storelink:check serve >/dev/null
trap '"${P[@]}" rm -f -v "$name" >/dev/null 2>&1 || true' EXIT
for _ in $(seq 1 30); do
  if "${P[@]}" healthcheck run "$name" >/dev/null 2>&1; then break; fi
  sleep 1
done
"${P[@]}" healthcheck run "$name"
echo "user: $("${P[@]}" inspect "$name" --format '{{.Config.User}}'), health: $("${P[@]}" inspect "$name" --format '{{.State.Health.Status}}')"
"${P[@]}" exec "$name" /storelink backup --to /data/check-backup.db
"${P[@]}" stop -t 35 "$name" >/dev/null
echo "exit code after SIGTERM: $("${P[@]}" inspect "$name" --format '{{.State.ExitCode}}')"
