"""The proxy's sync, built from its settings: the upstream client's configuration, the backup, the usage
sender and the sync's Prometheus series, publishing into the instance folder. `ProxyLeader` is what
flagproxy/instance/leader.py's LeaderThread runs in the main process of `--workers N`; with one process
flagproxy/proxy/app.py runs the same SyncService on the app's own loop."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from flagproxy.disk import disk_writer
from flagproxy.instance.leader import Instance, named_instance_directory, stop_sync
from flagproxy.proxy.settings import ProxySettings


def instance_directory(settings: ProxySettings) -> str:
    """`$TMPDIR/flagproxy-instance-<serviceAppName>-<port>`: where `flagproxy proxy` keeps its instance."""
    return named_instance_directory(settings.service_app_name, settings.port)


def build_sync(
    settings: ProxySettings,
    instance: Instance,
    logger: Any,
    log_warnings: bool = True,
    *,
    compile_apart: bool = False,
) -> Any:
    """The SyncService of `settings`, publishing into `instance`; `compile_apart` when it runs on a serving
    loop (flagproxy/instance/compiler.py). Imported late: a worker that does not sync never loads the HTTP
    client."""
    from flagproxy.instance.compiler import ImageCompiler
    from flagproxy.proxy.series import SyncSeries
    from flagproxy.sync.backup import UpstreamBackup
    from flagproxy.sync.service import SyncService
    from flagproxy.sync.upstream import UpstreamConfig, features_url
    from flagproxy.sync.usage import UsageCollector

    s = settings
    if log_warnings:
        for warning in s.warnings:
            logger.warn(warning)
    config = UpstreamConfig(
        url=s.service_url,
        token=s.service_api_token,
        app_name=s.service_app_name,
        instance_id=s.service_instance_id,
        refresh_interval=s.refresh_interval,
        streaming=s.streaming,
        metrics_interval=s.metrics_interval,
        project=s.project_name,
        name_prefix=s.name_prefix,
        tags=s.tags,
        verify_tls=s.http_options_reject_unauthorized,
        http_proxy=s.http_proxy,
        https_proxy=s.https_proxy,
        no_proxy=s.no_proxy,
        timeout_seconds=s.upstream_timeout / 1000,
    )
    publication = instance.publication
    observed = s.enable_prometheus or s.enable_status_page  # both read what the sync's series say

    # Apart from the first document on: compiled here, even with nothing to answer meanwhile, the parsed
    # document and the model left the serving process's arenas holding about 11 MiB more at 5000 flags
    # (98.3 against 87.2 MiB after load, benchmarks/README.md); apart, it only loads images.
    compiler = ImageCompiler(s.custom_strategies, logger, apart=lambda: compile_apart)

    async def publish(document: bytes, source: str) -> int:
        """`document` (the bytes the upstream sent) checked, compiled once for every worker and published;
        how many flags it holds. Raises DocumentError (nothing is published) for what is no features
        document. The document is written as it came: it is never parsed or encoded again here."""
        compiled = await compiler.compile(document)
        # Megabytes written at 5000 flags: on the writer thread, in order with the check times and series
        # (the loop, which may be serving, never waits on the disk).
        await disk_writer().run(publication.publish, document, source, compiled.image)
        return compiled.flags

    return SyncService(
        config,
        install=publish,
        touch=publication.touch,
        is_ready=lambda: publication.stamp() is not None,
        collector=UsageCollector(),
        gather_usage=instance.spool.collect,
        logger=logger,
        storage=s.storage_provider
        if s.storage_provider is not None
        else UpstreamBackup(
            s.service_url, s.service_api_token, selection=urlsplit(features_url(config)).query
        ),
        bootstrap_url=s.exp_bootstrap_url,
        bootstrap_authorization=s.exp_bootstrap_authorization,
        metrics_jitter=s.metrics_jitter,
        custom_strategy_names=[st.name for st in s.custom_strategies],
        observer=SyncSeries(instance.series_directory) if observed else None,
        ready_line=lambda flags, source: (
            f"flagproxy proxy is ready to receive traffic at http://{s.host}:{s.port}{s.proxy_base_path}"
            f"/proxy: {flags} flags from the {source} (upstream {s.service_url})"
        ),
        on_stop=compiler.close,
    )


class ProxyLeader:
    """The proxy's leader: its SyncService, stopped with `stop_sync`."""

    def __init__(self, settings: ProxySettings, instance: Instance, logger: Any) -> None:
        self.sync = build_sync(settings, instance, logger, log_warnings=False)
        self.instance = instance
        if self.sync.streamer is not None:  # each streamed change relayed to the workers, not published whole
            from flagproxy.instance.relay import EventRelay

            self.sync.streamer.patcher = EventRelay(instance.publication)

    async def start(self) -> None:
        await self.sync.start()

    async def stop(self) -> None:
        await stop_sync(self.sync, self.instance)
