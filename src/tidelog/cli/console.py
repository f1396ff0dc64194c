"""`tidelog console`: the web console (tidelog.console), a separate process and a plain client."""

from __future__ import annotations

from pathlib import Path

import click


@click.command("console")
@click.option("--bootstrap", "-b", default=None, envvar="TIDELOG_BOOTSTRAP_SERVER",
              metavar="HOST:PORT[,...]", help="The cluster (Tidelog or Kafka) [127.0.0.1:9092].")
@click.option("--listen", default=None, metavar="HOST:PORT",
              help="Where the console serves HTTP [127.0.0.1:8080].")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False,
                                                         path_type=Path),
              default=None, help="TOML settings: password, metrics URLs, audit log.")
@click.option("--metrics", "metrics", multiple=True, metavar="URL",
              help="A broker's Prometheus /metrics URL for the live charts (repeatable).")
def console_command(bootstrap: str | None, listen: str | None, config_file: Path | None,
                    metrics: tuple[str, ...]) -> None:
    """Serve the web console for a Kafka-protocol cluster."""
    try:
        import uvicorn

        from tidelog.console.app import create_app
        from tidelog.console.config import ConsoleConfigError, load_console_config
    except ImportError as error:
        raise click.ClickException(
            f"the console needs its extra: pip install 'tidelog[console]' ({error})") from None
    try:
        config = load_console_config(config_file, bootstrap=bootstrap, listen=listen,
                                     metrics=list(metrics) or None)
    except ConsoleConfigError as error:
        raise click.ClickException(str(error)) from None
    host, sep, port = config.listen.rpartition(":")
    if not sep or not port.isdigit():
        raise click.BadParameter(f"expected HOST:PORT, got {config.listen!r}",
                                 param_hint="'--listen'")
    app = create_app(config)
    server = uvicorn.Server(uvicorn.Config(app, host=host.strip("[]"), port=int(port),
                                           log_level="warning", access_log=False))
    # uvicorn with port 0 picks a free one: print the real address (tests read this line).
    original_startup = server.startup

    async def startup(sockets: object = None) -> None:
        await original_startup(sockets=sockets)  # type: ignore[arg-type]
        for s in server.servers:
            for sock in s.sockets:
                address = sock.getsockname()
                click.echo(f"tidelog console on http://{address[0]}:{address[1]}", err=False)
                return

    server.startup = startup  # type: ignore[method-assign]
    server.run()
