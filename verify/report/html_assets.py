"""The HTML report's own stylesheet and start-up script, as text the page inlines (`verify.report.html`).
Nothing here renders: the page is one offline file, so its CSS and JS travel inside it.
"""

from __future__ import annotations

__all__ = ["BOOT", "STYLE"]

# One page, one look: dflash's sections share the viewer's column (its Tailwind `container`: full width less the
# host's padding, capped at each breakpoint, centred), type scale and status colours (the viewer's own tokens,
# in oklch): a kill is green and a survivor red in both, a timeout amber, a crash grey. The matrix scrolls
# sideways inside its box instead of being cut at the window's edge. Each mutation's section is laid out only
# when near the screen (`content-visibility`): with 1,000 mutations their layout was half the page's load.
STYLE = """
:root { --ok: oklch(62.7% .194 149.214); --ok-deep: oklch(44.8% .119 151.328); --bad: oklch(63.7% .237 25.331);
  --bad-soft: oklch(93.6% .032 17.717); --amber: oklch(82.8% .189 84.429); --grey: oklch(70.8% 0 0);
  --orange: oklch(70.5% .213 47.604); --line: #ddd; }
body { margin: 0; color: #222; background: #fff; }
.dflash { font: 14px/1.5 -apple-system, BlinkMacSystemFont, "Segoe UI", Roboto, "Helvetica Neue", "Noto Sans", Arial,
  sans-serif; box-sizing: border-box; width: calc(100% - 3rem); margin-inline: auto; }
mutation-test-report-app { display: block; padding: 0 1.5rem; }
@media (min-width: 640px) { .dflash { max-width: 640px; } }
@media (min-width: 768px) { .dflash { max-width: 768px; } }
@media (min-width: 1024px) { .dflash { max-width: 1024px; } }
@media (min-width: 1280px) { .dflash { max-width: 1280px; } }
@media (min-width: 1536px) { .dflash { max-width: 1536px; } }
header.dflash { padding-top: 1rem; } header.dflash h1 { font-size: 3rem; font-weight: 700; margin: 0 0 .5rem; }
.dflash h2 { font-size: 1.5rem; margin: 1.5rem 0 .5rem; } .dflash h3 { font-size: 1.1rem; margin: 1.25rem 0 .25rem; }
.banner { padding: .6em 1em; font-size: 1.2em; font-weight: bold; border-radius: 6px; margin: .5rem 0; }
.pass { background: oklch(96.2% .044 156.743); color: var(--ok-deep); border: 2px solid var(--ok); }
.fail { background: var(--bad-soft); color: oklch(44.4% .177 26.899); border: 2px solid var(--bad); }
.dflash table { border-collapse: collapse; margin: .5rem 0 1rem; }
.dflash th, .dflash td { border: 1px solid var(--line); padding: 2px 6px; text-align: center; }
th.group { font-weight: normal; font-size: 12px; }
td.name, td.msg, td.gate { text-align: left; font-family: monospace; } td.name { white-space: nowrap; }
.scroll { overflow-x: auto; max-width: 100%; }
.c-A, .c-R { background: var(--ok); } .c-I { background: var(--ok-deep); }
.c-E, .c-M, .c-P, .c-D, .c-O { background: var(--grey); }
.c-T { background: var(--amber); } .c-dash { background: #eee; } .c-dot { background: #fff; }
td.cell a { color: #fff; text-decoration: none; display: block; } td.c-dot a, td.c-dash a, td.c-T a { color: #333; }
.legend { list-style: none; padding: 0; margin: .25rem 0; display: flex; flex-wrap: wrap; gap: .25rem 1rem; }
.legend .chip { display: inline-block; min-width: 1.4em; text-align: center; border: 1px solid var(--line);
  font-family: monospace; color: #fff; margin-right: .3em; }
.legend .c-dot, .legend .c-dash, .legend .c-T { color: #333; }
.s-killed, .s-caught { color: var(--ok-deep); } .s-survived { color: var(--bad); font-weight: bold; }
.s-declared { color: #777; } .s-timeout { color: oklch(55.5% .163 48.998); font-weight: bold; }
.s-crashed, .s-error { color: #555; font-weight: bold; } .s-stale { color: var(--orange); }
.s-equivalent, .s-uncovered, .s-skipped { color: #777; }
.dflash pre { background: #f7f7f7; padding: .5em; overflow-x: auto; } .dflash pre.explanation { white-space: pre-wrap; }
.mutation { content-visibility: auto; contain-intrinsic-size: auto 280px; }
.survivor { border-left: 4px solid var(--bad); padding: .1rem 0 .1rem 1rem; margin: .75rem 0; }
.warn { color: var(--bad); } .note { background: #f5f5f5; border-left: 4px solid var(--grey); padding: .4em .8em; }
.meta, .legend { color: #555; font-size: 12px; } nav a { margin-right: 1.5em; }
body.dark .dflash { color: #ddd; } body.dark .dflash pre, body.dark .note { background: #222; }
body.dark .dflash a { color: #8ab4f8; } body.dark .meta, body.dark .legend { color: #aaa; }
"""

# Feeds the viewer the inlined report, follows its theme, and keeps dflash's own links from changing the
# fragment (the viewer routes on it).
BOOT = """
const app = document.querySelector("mutation-test-report-app");
app.report = JSON.parse(document.getElementById("dflash-stryker").textContent);
const paint = () => {
  document.body.style.backgroundColor = app.themeBackgroundColor || "";
  document.body.classList.toggle("dark", app.theme === "dark");
};
app.addEventListener("theme-changed", paint);
paint();
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest('.dflash a[href^="#"]');
  const target = link && document.getElementById(decodeURIComponent(link.getAttribute("href").slice(1)));
  if (target) { event.preventDefault(); target.scrollIntoView(); }
});
"""
