"""The course's translations: gettext catalogues per document, generated translated copies.

A maintainers' tool, not part of ``labsupport`` (learners never import it, and it needs
translate-toolkit): ``python -m i18n update | check | init`` from the repository root,
or ``make translations``. See ``i18n/README.md``.
"""
