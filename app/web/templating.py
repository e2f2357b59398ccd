"""The console's Jinja template class: macro imports that find the cached module fast.

Jinja 3.1 checks, on every ``{% from ... import ... %}``, whether the importing
context has globals the imported template lacks, by subtracting a ChainMap's keys
view from a set in pure Python (about 25 globals here). A row template included
once per row imports its macros once per row, so a 120-row list paid that check
hundreds of times per page. The same check done by ``set.issubset`` in C gives the
same answer: when no global is new, the cached module is used, as Jinja would.
"""

from __future__ import annotations

from jinja2 import Template


class ConsoleTemplate(Template):
    def _get_default_module(self, ctx=None):
        if ctx is not None and ctx.globals_keys.issubset(self.globals):
            ctx = None  # nothing new to give the module: Jinja's cached module is the answer
        return super()._get_default_module(ctx)


def register_templating(app) -> None:
    """Use `ConsoleTemplate` for every template the app loads."""
    app.jinja_env.template_class = ConsoleTemplate
