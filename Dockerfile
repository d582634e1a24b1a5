# logitscope serve in a container: the static server binary and the page on
# a minimal base (distroless static: no shell, no libc, a nonroot user).
#
#   docker build -t logitscope .
#   docker run -p 8080:8080 -v logitscope-data:/data \
#     -e LOGITSCOPE_WRITE_TOKEN=... logitscope -public-url https://logits.example.com
#
# Arguments after the image name are serve's flags, added to the
# ENTRYPOINT's. /data holds shared runs (/data/runs) and the demo model's
# cache; mount a volume there to keep them. Mount checkpoints under
# /models and add -models /models to serve them instead of the demo.
#
# Not built in CI: the machines this project's CI and development run on
# have the docker client but no Docker engine, so `docker build` cannot
# run there. What can be tested is: deploy/build.sh, which this file runs
# to build everything, is run by cmd/serve's TestContainerRecipe (and
# `make image-files`), which then starts the result with this file's
# ENTRYPOINT flags and checks /healthz, the page and a share.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN deploy/build.sh /out

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/serve /serve
COPY --from=build /out/web /web
ENV LOGITSCOPE_CACHE=/data
VOLUME /data
EXPOSE 8080
ENTRYPOINT ["/serve", "-addr", "0.0.0.0:8080", "-static", "/web", "-data", "/data"]
