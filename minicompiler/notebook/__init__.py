"""Notebook layer: everything a CompileReport says, shown where the learner works.

    views.py      static HTML of every view (what `%%compile` and `report._repr_html_` show)
    magics.py     %%compile, %compile_explain, %compile_bench, %compile_report
    steppers.py   bytecode and fusion steppers;  widgets.py: stage tabs, cross-stage links,
                  C++ / Triton side by side;  whatif.py: change an input, see the failing guard
    charts.py     plotly charts, each with an HTML table of the same numbers

Views need no JavaScript; widgets need ipywidgets and a live kernel; charts need plotly.
"""

from minicompiler.notebook.charts import Chart, report_charts
from minicompiler.notebook.steppers import BytecodeStepper, FusionStepper
from minicompiler.notebook.views import ReportView, report_to_html
from minicompiler.notebook.whatif import GuardWhatIf
from minicompiler.notebook.widgets import CrossLinks, KernelSideBySide, StageTabs

__all__ = [
    "BytecodeStepper", "Chart", "CrossLinks", "FusionStepper", "GuardWhatIf", "KernelSideBySide",
    "ReportView", "StageTabs", "report_charts", "report_to_html",
]
