# syntax=docker/dockerfile:1
# The kvlease image: one static binary, kvlease-server (serve, proxy and
# version, without the tools and their plotting), on a distroless, non-root
# base.
#
#   docker build -t kvlease:dev .        (or: podman build -t kvlease:dev .)
#   docker run --rm -p 8000:8000 kvlease:dev serve --profile tiny
#
# Every serve flag can also be set from the environment (KVLEASE_PORT,
# KVLEASE_ADVERTISE_HOST, ...); the Helm chart in deploy/helm/kvlease does so.

ARG GO_VERSION=1.26

FROM docker.io/library/golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# Static (no cgo: kvlease has no C dependency), reproducible paths, the
# version that /version and the startup log report.
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.buildVersion=${VERSION}" \
      -o /out/kvlease-server ./cmd/kvlease-server

# distroless/static: CA certificates, tzdata, /etc/passwd with the nonroot
# user (65532), no shell and no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/kvlease-server /usr/local/bin/kvlease-server
USER 65532:65532
# In a container the engine listens on every interface; a prefill engine
# then needs KVLEASE_ADVERTISE_HOST (the pod IP) so decode engines can
# dial it.
ENV KVLEASE_HOST=0.0.0.0
# HTTP, P/D transfer, KV events (PUB, replay).
EXPOSE 8000 9000 5557 5558
ENTRYPOINT ["kvlease-server"]
CMD ["serve"]
