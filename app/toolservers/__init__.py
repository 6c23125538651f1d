"""Tool servers: PCM as an MCP client (an adapter, like ``app.store`` or ``app.llm``).

``config`` is the data folder's ``tool_servers.json`` (stdio commands and streamable HTTP URLs,
added by ``pcm tools``, Settings → Tools, or imported from another desktop client's
``{"mcpServers": …}``); ``client.McpToolServers`` runs them off the engine's loop and implements
the ``ToolServers`` port (``app.core.ports``) the engine reaches them through; ``convert`` turns
the SDK's listings and results into the port's terms. Imports ``app.core`` and the ``mcp`` SDK only.
"""
