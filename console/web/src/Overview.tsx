import { useEffect, useState } from "react";
import { ClusterInfo, Point, get } from "./api";
import { Chart } from "./Chart";
import { ErrorBox, formatBytes, useLoad } from "./common";

export function Overview() {
  const cluster = useLoad(() => get<ClusterInfo>("/api/cluster"), [], 3000);
  const [points, setPoints] = useState<Point[]>([]);
  useEffect(() => {
    let closed = false;
    void get<{ points: Point[] }>("/api/metrics").then((r) => !closed && setPoints(r.points)).catch(() => {});
    const source = new EventSource("/api/metrics/stream");
    source.onmessage = (event) => {
      const point = JSON.parse(event.data) as Point;
      const cutoff = Date.now() - 15 * 60 * 1000;
      setPoints((old) => [...old.filter((p) => p.t >= cutoff), point]);
    };
    return () => {
      closed = true;
      source.close();
    };
  }, []);
  const c = cluster.data;
  const xs = points.map((p) => p.t / 1000);
  return (
    <section>
      <h1>Overview</h1>
      <ErrorBox error={cluster.error} />
      {c && !c.reachable && (
        <div className="error" role="alert">
          Cluster unreachable at {c.bootstrap}: {c.error}
        </div>
      )}
      {c && (
        <>
          <dl className="facts">
            <dt>Status</dt>
            <dd className={c.reachable ? "up" : "down"} data-testid="cluster-status">
              {c.reachable ? "reachable" : "down"}
            </dd>
            <dt>Cluster id</dt>
            <dd>{c.cluster_id ?? "–"}</dd>
            <dt>Controller</dt>
            <dd>{c.controller_id ?? "–"}</dd>
            <dt>Topics</dt>
            <dd>{c.topics ?? "–"}</dd>
            <dt>Partitions</dt>
            <dd>{c.partitions ?? "–"}</dd>
            <dt>Bootstrap</dt>
            <dd>{c.bootstrap}</dd>
          </dl>
          <h2>Brokers</h2>
          <table>
            <thead>
              <tr>
                <th>Id</th>
                <th>Address</th>
                <th>Controller</th>
                <th>Partitions led</th>
                <th>Status</th>
              </tr>
            </thead>
            <tbody>
              {c.brokers.map((b) => (
                <tr key={b.id}>
                  <td>{b.id}</td>
                  <td>
                    {b.host}:{b.port}
                  </td>
                  <td>{b.controller ? "yes" : ""}</td>
                  <td>{b.partitions_led}</td>
                  <td className={b.up ? "up" : "down"} data-testid={`broker-${b.id}-status`}>
                    {b.up ? "up" : "down"}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      {c && c.metrics.length > 0 && (
        <>
          <h2>Metrics endpoints</h2>
          <table>
            <thead>
              <tr>
                <th>/metrics</th>
                <th>Status</th>
                <th>Disk use (log bytes)</th>
              </tr>
            </thead>
            <tbody>
              {c.metrics.map((m) => (
                <tr key={m.url}>
                  <td className="mono">{m.url}</td>
                  <td className={m.up ? "up" : m.up === false ? "down" : ""}>
                    {m.up ? "up" : m.up === false ? `down: ${m.error}` : "not scraped yet"}
                  </td>
                  <td>{formatBytes(m.disk_bytes)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
      <h2>Throughput (last 15 minutes)</h2>
      <p className="muted" data-testid="chart-points">
        {points.length} samples
      </p>
      {c && c.metrics.length === 0 && (
        <p className="muted">No /metrics endpoint configured (set metrics in the console's config); Apache Kafka brokers have none.</p>
      )}
      <div className="charts">
        <Chart
          title="Messages per second"
          unit="msg/s"
          series={[
            { label: "in", color: "#2563eb" },
            { label: "out", color: "#16a34a" },
          ]}
          data={[xs, points.map((p) => p.messages_in), points.map((p) => p.messages_out)]}
        />
        <Chart
          title="Bytes per second"
          unit="B/s"
          series={[
            { label: "in", color: "#9333ea" },
            { label: "out", color: "#ea580c" },
          ]}
          data={[xs, points.map((p) => p.bytes_in), points.map((p) => p.bytes_out)]}
        />
        <Chart
          title="Latency p99 (ms)"
          unit="ms"
          series={[
            { label: "produce", color: "#dc2626" },
            { label: "fetch", color: "#0891b2" },
          ]}
          data={[xs, points.map((p) => p.produce_p99_ms), points.map((p) => p.fetch_p99_ms)]}
        />
      </div>
    </section>
  );
}
