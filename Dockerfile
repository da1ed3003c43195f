# The maljan binary for compose.yaml: built from this checkout, run as an unprivileged user.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release -p maljan

FROM debian:bookworm-slim
RUN useradd --system --create-home --home-dir /data maljan
COPY --from=build /src/target/release/maljan /usr/local/bin/maljan
USER maljan
ENV MALJAN_HOME=/data
WORKDIR /data
ENTRYPOINT ["maljan"]
