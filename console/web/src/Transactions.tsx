// Transactions page: every transaction the coordinators know, with state, producer id/epoch,
// start time and partitions; an open transaction's partition can be aborted (a hanging
// transaction, as `kafka-transactions abort --start-offset`) after a confirmation.
import { useState } from "react";
import { Transaction, TxnPartition, api, get } from "./api";
import { ErrorBox, formatTime, useLoad } from "./common";

export function Transactions() {
  const txns = useLoad(() => get<{ transactions: Transaction[]; truncated: boolean }>("/api/transactions"), [], 10000);
  const [confirming, setConfirming] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const abort = async (p: TxnPartition) => {
    try {
      await api("POST", "/api/transactions/abort", { topic: p.topic, partition: p.partition, start_offset: p.start_offset });
      setStatus(`Aborted the transaction on ${p.topic}-${p.partition} (from offset ${p.start_offset}).`);
      setConfirming(null);
      setError(null);
      await txns.reload();
    } catch (err) {
      setError(err instanceof Error ? err.message : String(err));
    }
  };
  return (
    <section>
      <h1>Transactions</h1>
      <p className="muted">
        Abort writes an ABORT marker for the producer on that partition (as kafka-transactions abort), so a hanging transaction no longer
        holds back read_committed consumers; the coordinator keeps its state until the transaction times out.
      </p>
      <div className="toolbar">
        <button onClick={() => void txns.reload()}>Refresh</button>
      </div>
      <ErrorBox error={txns.error} />
      <ErrorBox error={error} />
      {status && <p role="status">{status}</p>}
      <table data-testid="txn-table">
        <thead>
          <tr>
            <th>Transactional id</th>
            <th>State</th>
            <th>Producer id / epoch</th>
            <th>Started (UTC)</th>
            <th>Running for</th>
            <th>Partitions (open transaction's first offset)</th>
          </tr>
        </thead>
        <tbody>
          {(txns.data?.transactions ?? []).map((t) => (
            <tr key={t.transactional_id} data-testid={`txn-row-${t.transactional_id}`}>
              <td className="mono">{t.transactional_id}</td>
              <td>{t.error ? <span className="down">{t.error}</span> : t.state}</td>
              <td>
                {t.producer_id} / {t.producer_epoch ?? "–"}
              </td>
              <td>{formatTime(t.start_time_ms ?? null)}</td>
              <td>{t.duration_ms != null ? `${Math.round(t.duration_ms / 1000)} s` : "–"}</td>
              <td>
                {(t.partitions ?? []).map((p) => {
                  const id = `${t.transactional_id}|${p.topic}|${p.partition}`;
                  return (
                    <div key={id}>
                      <span className="mono">
                        {p.topic}-{p.partition}
                      </span>
                      {p.start_offset !== undefined && ` from ${p.start_offset} `}
                      {p.error && <span className="down"> {p.error}</span>}
                      {p.start_offset !== undefined &&
                        (confirming === id ? (
                          <>
                            <button className="danger" onClick={() => void abort(p)}>Confirm abort</button>{" "}
                            <button onClick={() => setConfirming(null)}>Cancel</button>
                          </>
                        ) : (
                          <button onClick={() => setConfirming(id)} aria-label={`Abort the transaction on ${p.topic}-${p.partition}`}>
                            Abort
                          </button>
                        ))}
                    </div>
                  );
                })}
              </td>
            </tr>
          ))}
          {txns.data && txns.data.transactions.length === 0 && (
            <tr>
              <td colSpan={6} className="muted">No transactions (or none you may describe).</td>
            </tr>
          )}
        </tbody>
      </table>
      {txns.data?.truncated && <p className="muted">Only the first 500 transactional ids are shown.</p>}
    </section>
  );
}
