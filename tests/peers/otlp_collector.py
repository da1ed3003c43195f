#!/usr/bin/env python3
"""An OTLP/HTTP (protobuf) collector stand-in: records what the exporters send.

Usage: otlp_collector.py --port P --out FILE
POST /v1/traces and /v1/metrics are decoded with opentelemetry-proto and appended to FILE as one
JSON object a line: {"signal": "traces", "body": <the request as JSON>} (protobuf's JSON form).
Anything else gets 404; a body that does not decode gets 400.
"""
import argparse
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

SIGNALS = {
    "/v1/traces": ("traces", ExportTraceServiceRequest, ExportTraceServiceResponse),
    "/v1/metrics": ("metrics", ExportMetricsServiceRequest, ExportMetricsServiceResponse),
}

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--out", required=True)
a = p.parse_args()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        signal = SIGNALS.get(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if signal is None:
            self.send_response(404)
            self.end_headers()
            return
        name, request_type, response_type = signal
        try:
            request = request_type.FromString(body)
        except Exception:  # noqa: BLE001 - any undecodable body is the sender's fault
            self.send_response(400)
            self.end_headers()
            return
        with open(a.out, "a", encoding="utf-8") as f:
            f.write(json.dumps({"signal": name, "body": MessageToDict(request)}) + "\n")
        answer = response_type().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", a.port), Handler).serve_forever()
