"""The base of every console form: Flask-WTF (CSRF) reading only the urlencoded form.

Flask-WTF would also read uploaded files and JSON bodies into the fields; the
console never takes either, and a file where text is expected must be refused as
bad input, not crash a validator.
"""

from __future__ import annotations

from flask import request
from flask_wtf import FlaskForm
from flask_wtf.form import _Auto


class ConsoleForm(FlaskForm):
    class Meta(FlaskForm.Meta):
        def wrap_formdata(self, form, formdata):
            if formdata is _Auto:
                return request.form if request.method in ("POST", "PUT", "PATCH", "DELETE") and request.form else None
            return formdata

        def render_field(self, field, render_kw):
            """A field's HTML; the CSRF field's, rendered once per form (a list renders the
            same hidden input in every row's form, and WTForms' attribute rendering is slow)."""
            if field.type != "CSRFTokenField" or render_kw:
                return super().render_field(field, render_kw)
            rendered = getattr(field, "_rendered", None)
            if rendered is None:
                rendered = field._rendered = super().render_field(field, render_kw)
            return rendered
