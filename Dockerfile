# Multi-stage build of the one modelgate binary: a static, non-root image.
# Build: docker build -t modelgate:dev .
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/modelgate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/modelgate /modelgate
USER 65532:65532
ENTRYPOINT ["/modelgate"]
CMD ["gateway"]
