"""The report's sections, in the order it shows them: the one list to extend.

Adding a section is one module plus one entry here: the module defines a distbench.core.section.Section
(its context from the ReportInputs, optionally headlines, findings and skips) with its fragments
<name>.md.j2 and <name>.html.j2 in the directory it names; render.py and the main templates stay as
they are. The Verdict and the Findings gather what every section gives them, in this order within a
verdict (NODES before the families: a bad node is named first).
"""

from __future__ import annotations

from distbench.comm.analysis.section import COMMUNICATION, PROBLEMS
from distbench.memory.analysis.section import MEMORY
from distbench.nodes.analysis.section import NODES
from distbench.predict.section import PREDICTION
from distbench.probes.health_section import HEALTH_SECTION
from distbench.report.appendix import APPENDIX, EXTRAS, TOPOLOGY
from distbench.report.hangs import HANGS
from distbench.report.overview import FINDINGS, OTHER_FIGURES, PLAN, REGRESSIONS, SEVERAL_RUNS, VERDICT
from distbench.traces.section import TRACES
from distbench.training.analysis.section import TRAINING

SECTIONS = (VERDICT, REGRESSIONS, FINDINGS, PLAN, HEALTH_SECTION, NODES, HANGS, COMMUNICATION, SEVERAL_RUNS, TRAINING,
            MEMORY, PREDICTION, TRACES,
            PROBLEMS, OTHER_FIGURES, TOPOLOGY, EXTRAS, APPENDIX)
