# Builds the fencedq command (dashboard, operator commands; the entrypoint)
# and the bank example's worker, bank-worker (docker-compose.yml runs it as
# the workers' entrypoint). The demo, which stages failures, is not in the
# image: run it from a checkout (go run ./cmd/fencedq-demo).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# The library (root module) and the commands (module ./cmd), joined by
# go.work: the commands build against the library of this checkout. The
# library's requirements are fetched first (a cached layer); the commands'
# own are fetched by the build.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The version pools publish in their heartbeat (jobs.Version); the build
# context holds no git history, so pass it:
#   docker build --build-arg VERSION=$(git describe --tags --always --dirty) .
# Without it, pools report "(devel)".
ARG VERSION=
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/fencedq/fencedq/jobs.Version=${VERSION}" -o /out/fencedq ./cmd/fencedq \
    && CGO_ENABLED=0 go build -trimpath -ldflags "-X github.com/fencedq/fencedq/jobs.Version=${VERSION}" -o /out/bank-worker ./examples/bank/cmd/bank-worker

FROM debian:12.9-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates wget \
    && rm -rf /var/lib/apt/lists/* && useradd --system --uid 10001 fencedq
COPY --from=build /out/fencedq /usr/local/bin/fencedq
COPY --from=build /out/bank-worker /usr/local/bin/bank-worker
USER fencedq
ENTRYPOINT ["/usr/local/bin/fencedq"]
CMD ["--help"]
