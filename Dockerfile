FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=1 go build -o /lethe ./cmd/lethe

FROM debian:bookworm-slim
COPY --from=build /lethe /usr/local/bin/lethe
USER 65534
ENTRYPOINT ["lethe"]
