"""An MCP server written with the official Python SDK (`mcp`), for the
gateway's test to stand behind `arbiter gateway`: a transfer tool that
appends each call it runs to the file named by GATEWAY_UPSTREAM_LOG, one
JSON line each, and an echo. Run as a process of its own on stdio."""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer

bank = MCPServer("python-bank")


@bank.tool(description="Transfer money to another account.")
def transfer(to: str, amount: float) -> str:
    with open(os.environ["GATEWAY_UPSTREAM_LOG"], "a") as log:
        log.write(json.dumps({"tool": "transfer", "args": {"to": to, "amount": amount}}) + "\n")
    return f"Transferred {amount:g} EUR to {to}."


@bank.tool(description="Answer the message.")
def echo(message: str) -> str:
    return message


if __name__ == "__main__":
    bank.run()
