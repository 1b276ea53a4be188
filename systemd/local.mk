# systemd/: bitwheeld's socket and service units, the sysusers.d entry
# that creates the socket's client group, and the timer and service that
# write the metrics for node_exporter (installed, not enabled).
# tests/check_systemd checks them.

EXTRA_DIST += \
	systemd/bitwheeld.socket \
	systemd/bitwheeld.service.in \
	systemd/bitwheeld.default \
	systemd/bitwheel-metrics.service.in \
	systemd/bitwheel-metrics.timer \
	systemd/bitwheel.sysusers

# Filled in by make rather than by configure: configure would leave
# "${exec_prefix}/sbin" unexpanded, which systemd cannot read, and only
# make sees a prefix given on its command line (make prefix=..., and
# distcheck's install into a scratch directory).  The Makefile prerequisite
# regenerates them when a new configure changes sbindir, bindir or
# sysconfdir.
bw_unit_subst = $(AM_V_GEN)$(MKDIR_P) $(@D) && rm -f $@ $@.tmp && \
	$(SED) -e 's|@sbindir[@]|$(sbindir)|g' -e 's|@bindir[@]|$(bindir)|g' \
		-e 's|@sysconfdir[@]|$(sysconfdir)|g' \
		$(srcdir)/$@.in > $@.tmp && \
	chmod a-w $@.tmp && mv $@.tmp $@
systemd/bitwheeld.service: systemd/bitwheeld.service.in Makefile
	$(bw_unit_subst)
systemd/bitwheel-metrics.service: systemd/bitwheel-metrics.service.in Makefile
	$(bw_unit_subst)

# sysusers.d reads only *.conf; the source keeps a name that says what the
# file is for, like debhelper's package.sysusers.
systemd/bitwheel.conf: systemd/bitwheel.sysusers
	$(AM_V_GEN)$(MKDIR_P) $(@D) && \
	cp $(srcdir)/systemd/bitwheel.sysusers $@

CLEANFILES += systemd/bitwheeld.service systemd/bitwheel-metrics.service \
	systemd/bitwheel.conf

if HAVE_SYSTEMD_UNITDIR
systemdsystemunit_DATA = systemd/bitwheeld.socket systemd/bitwheeld.service \
	systemd/bitwheel-metrics.service systemd/bitwheel-metrics.timer
# Under the prefix, so distcheck can install it as a normal user; systemd
# also reads /usr/local/lib/sysusers.d.  Packagers building with
# --prefix=/usr get /usr/lib/sysusers.d.
sysusersdir = $(prefix)/lib/sysusers.d
sysusers_DATA = systemd/bitwheel.conf
bw_installcheck_files += $(systemdsystemunitdir)/bitwheeld.socket \
	$(systemdsystemunitdir)/bitwheeld.service \
	$(systemdsystemunitdir)/bitwheel-metrics.service \
	$(systemdsystemunitdir)/bitwheel-metrics.timer $(sysusersdir)/bitwheel.conf
endif

# The service's options file, at the path its EnvironmentFile= names:
# /etc/default/bitwheeld with --sysconfdir=/etc (README's build, Debian's),
# else under the prefix like everything else.  An administrator's copy is
# never overwritten, and make uninstall removes the file only while it is
# still the one shipped.  Installed with the units or without them.
bw_defaultdir = $(sysconfdir)/default
install-data-local: bw-default-install
uninstall-local: bw-default-uninstall

bw-default-install:
	@f='$(DESTDIR)$(bw_defaultdir)/bitwheeld'; \
	if test -e "$$f"; then \
	  echo "install: $$f exists: left as it is"; \
	else \
	  $(MKDIR_P) '$(DESTDIR)$(bw_defaultdir)' && \
	  echo " $(INSTALL_DATA) bitwheeld.default '$$f'" && \
	  $(INSTALL_DATA) $(srcdir)/systemd/bitwheeld.default "$$f"; \
	fi

bw-default-uninstall:
	@f='$(DESTDIR)$(bw_defaultdir)/bitwheeld'; \
	if cmp -s $(srcdir)/systemd/bitwheeld.default "$$f"; then \
	  rm -f "$$f"; \
	elif test -e "$$f"; then \
	  echo "uninstall: $$f was changed: left in place"; \
	fi

bw_installcheck_files += $(bw_defaultdir)/bitwheeld
.PHONY: bw-default-install bw-default-uninstall

# After a live install (empty DESTDIR, configure's --enable-post-install)
# create the group at once, as systemd-sysusers.service would at the next
# boot: bitwheeld.socket cannot start without it.  Tolerant like the
# ldconfig step in Makefile.am: without the tool or root, a note says what
# to run.
install-data-hook:
	@if test -z '$(DESTDIR)' && test '$(BW_POST_INSTALL)' = yes && \
	    test -n '$(sysusers_DATA)'; then \
	  if command -v systemd-sysusers >/dev/null 2>&1 && \
	      systemd-sysusers '$(sysusersdir)/bitwheel.conf'; then \
	    echo "post-install: systemd-sysusers: group bitwheel is there"; \
	  else \
	    echo "post-install: note: could not run systemd-sysusers;" \
	      "as root run: systemd-sysusers $(sysusersdir)/bitwheel.conf" \
	      "(or groupadd --system bitwheel)"; \
	  fi; \
	fi

