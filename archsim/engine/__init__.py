"""archsim.engine"""
