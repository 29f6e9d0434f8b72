#!/usr/bin/env python3
"""A loopback TCP forwarder for outage tests: listen on 127.0.0.1:PORT and
forward every connection to TARGET_HOST:TARGET_PORT byte for byte.  Killing
the process cuts every connection at once, as a database outage would.

    tcp_proxy.py LISTEN_PORT TARGET_HOST TARGET_PORT
Prints "ready PORT" once listening.
"""
import asyncio
import sys


async def pipe(reader, writer):
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def main():
    port, host, target = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])

    async def handle(cr, cw):
        try:
            sr, sw = await asyncio.open_connection(host, target)
        except OSError:
            cw.close()
            return
        await asyncio.gather(pipe(cr, sw), pipe(sr, cw))

    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    print("ready", port, flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main())
