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
