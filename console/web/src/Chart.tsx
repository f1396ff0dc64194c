import { useEffect, useRef } from "react";
import uPlot from "uplot";
import "uplot/dist/uPlot.min.css";

export interface Series {
  label: string;
  color: string;
}

// A uPlot line chart over time (x in seconds); redrawn in place when the data change.
export function Chart(props: { title: string; series: Series[]; data: (number | null)[][]; unit: string }) {
  const host = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  useEffect(() => {
    if (!host.current) return;
    const opts: uPlot.Options = {
      title: props.title,
      width: host.current.clientWidth || 560,
      height: 220,
      series: [
        {},
        ...props.series.map((s) => ({
          label: s.label,
          stroke: s.color,
          width: 2,
          value: (_u: uPlot, v: number | null) => (v === null ? "–" : `${v.toFixed(1)} ${props.unit}`),
        })),
      ],
      axes: [{}, { size: 70, values: (_u, vals) => vals.map((v) => `${v}`) }],
      scales: { x: { time: true } },
    };
    plot.current = new uPlot(opts, props.data as uPlot.AlignedData, host.current);
    return () => {
      plot.current?.destroy();
      plot.current = null;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);
  return <div className="chart" ref={host} aria-label={props.title} role="img" />;
}
