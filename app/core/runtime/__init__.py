"""The runtime: executors, streams, scheduler. Pure asyncio; the loop is Qt's (qasync) or asyncio's."""
