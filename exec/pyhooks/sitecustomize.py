# placeholder: replaced by the figures branch
